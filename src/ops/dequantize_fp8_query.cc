// dequantize_fp8_query: validation, the CPU implementation, and dispatch to the CUDA kernel.
#include <cstdint>
#include <string>

#include "common/numeric.h"
#include "pagedattn/config.h"
#include "pagedattn/ops.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/dequantize_query.h"
#endif

namespace pagedattn {
namespace {

// scale [1], or [num_reqs, num_kv_heads] beside cu_seqlens_q [num_reqs + 1].
Status check_scale(const TensorView& scale, const TensorView& cu_seqlens_q,
                   const TensorView& query) {
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(scale, "scale", {DType::kF32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(scale, "scale", query.device()));
  if (scale.rank() == 1 && scale.size(0) == 1) return ok_status();
  if (scale.rank() != 2 || scale.size(0) < 1 || scale.size(1) < 1 ||
      query.size(1) % scale.size(1) != 0) {
    return invalid_argument("scale is " + scale.describe() +
                            "; allowed: [1] or [num_reqs, num_kv_heads] with num_kv_heads "
                            "dividing the query's " +
                            std::to_string(query.size(1)) + " heads");
  }
  if (!cu_seqlens_q.defined()) {
    return invalid_argument("cu_seqlens_q is required with a scale per request (scale " +
                            scale.describe() + ")");
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(cu_seqlens_q, "cu_seqlens_q", 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_shape(cu_seqlens_q, "cu_seqlens_q", {scale.size(0) + 1}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(cu_seqlens_q, "cu_seqlens_q", {DType::kI32}));
  return expect_device(cu_seqlens_q, "cu_seqlens_q", query.device());
}

// Non-decreasing from 0 (a CUDA array is not read: that would wait for the device).
Status check_host_starts(const TensorView& cu_seqlens_q) {
  const int64_t n = cu_seqlens_q.size(0);
  const auto at = [&](int64_t i) {
    return cu_seqlens_q.data_as<const int32_t>()[i * cu_seqlens_q.stride(0)];
  };
  for (int64_t i = 0; i < n; ++i) {
    if (at(i) < (i == 0 ? 0 : at(i - 1))) {
      return invalid_argument("cu_seqlens_q[" + std::to_string(i) + "] = " + std::to_string(at(i)) +
                              ": the starts must be non-decreasing from 0");
    }
  }
  return ok_status();
}

void dequantize_on_cpu(const TensorView& output, const TensorView& query, const TensorView& scale,
                       const TensorView& cu_seqlens_q) {
  const int64_t tokens = query.size(0), heads = query.size(1), d = query.size(2);
  const bool per_request = scale.defined() && scale.rank() == 2;
  const int64_t heads_per_kv_head = per_request ? heads / scale.size(1) : 1;
  int64_t req = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (per_request) {  // the last request starting at or before t
      const auto start = [&](int64_t r) {
        return cu_seqlens_q.data_as<const int32_t>()[r * cu_seqlens_q.stride(0)];
      };
      while (req + 1 < scale.size(0) && start(req + 1) <= t) ++req;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float s = 1.0f;
      if (per_request) {
        s = scale.data_as<const float>()[req * scale.stride(0) +
                                         (h / heads_per_kv_head) * scale.stride(1)];
      } else if (scale.defined()) {
        s = scale.data_as<const float>()[0];
      }
      for (int64_t i = 0; i < d; ++i) {
        const float x =
            load_as_float(query.data(), DType::kFP8E4M3,
                          t * query.stride(0) + h * query.stride(1) + i * query.stride(2));
        store_from_float(output.data(), output.dtype(),
                         t * output.stride(0) + h * output.stride(1) + i * output.stride(2), x * s);
      }
    }
  }
}

}  // namespace

Status dequantize_fp8_query(const TensorView& output, const TensorView& query,
                            const TensorView& scale, const TensorView& cu_seqlens_q,
                            StreamHandle stream) {
  if (!query.defined()) return invalid_argument("query is required");
  if (!output.defined()) return invalid_argument("output is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(query, "query", 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(query, "query", {DType::kFP8E4M3}));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(output, "output", 3));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(output, "output", {query.size(0), query.size(1), query.size(2)}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(output, "output", query.device()));
  if (query.device().is_cpu()) {  // CPU_ATTN's f32 layers read it too
    PAGEDATTN_RETURN_IF_ERROR(
        expect_dtype(output, "output", {DType::kF16, DType::kBF16, DType::kF32}));
  } else {
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(output, "output", {DType::kF16, DType::kBF16}));
  }
  if (scale.defined()) PAGEDATTN_RETURN_IF_ERROR(check_scale(scale, cu_seqlens_q, query));
  const bool per_request = scale.defined() && scale.rank() == 2;
  if (query.device().is_cpu()) {
    if (per_request) PAGEDATTN_RETURN_IF_ERROR(check_host_starts(cu_seqlens_q));
    dequantize_on_cpu(output, query, scale, cu_seqlens_q);
    return ok_status();
  }
#if PAGEDATTN_WITH_CUDA
  return kernels::launch_dequantize_fp8_query(output, query, scale, cu_seqlens_q, stream);
#else
  (void)stream;
  return unimplemented("dequantize_fp8_query on " + device_name(query.device()) +
                       ": this build has no CUDA support");
#endif
}

}  // namespace pagedattn
