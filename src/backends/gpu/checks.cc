#include "backends/gpu/checks.h"

#include <limits>
#include <string>
#include <vector>

#include "backends/builder_limits.h"
#include "backends/cache_checks.h"
#include "backends/layer_spec.h"
#include "backends/query_checks.h"

namespace pagedattn::gpu {
namespace {

std::string prefix(const AttentionBackend& backend, std::string_view part) {
  return std::string(backend.name()) + " " + std::string(part) + ": ";
}

std::string dtypes_text(const AttentionBackend& backend) {
  std::string text;
  for (DType d : backend.supported_dtypes())
    text += (text.empty() ? "" : ", ") + std::string(dtype_name(d));
  return text;
}

std::string block_sizes_text(const AttentionBackend& backend) {
  std::string text;
  for (const MultipleOf& m : backend.supported_kernel_block_sizes()) {
    text += (text.empty() ? "multiples of " : " or ") + std::to_string(m.base);
  }
  return text.empty() ? "any positive size" : text;
}

std::string attn_types_text(const AttentionBackend& backend) {
  std::string text;
  for (AttentionType t : {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder}) {
    if (backend.supports_attn_type(t)) {
      text += (text.empty() ? "" : ", ") + std::string(attention_type_name(t));
    }
  }
  return text;
}

// What builder and impl both check: the device, the head counts, the head size and the dtype.
Status check_layer(const AttentionBackend& backend, std::string_view part, const Device& device,
                   int num_heads, int num_kv_heads, int head_size, DType dtype) {
  const std::string where = prefix(backend, part);
  if (!device.is_cuda()) {
    return invalid_argument(where + "device is " + device_name(device) +
                            "; expected a CUDA device");
  }
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return invalid_argument(where + "num_heads = " + std::to_string(num_heads) +
                            ", num_kv_heads = " + std::to_string(num_kv_heads) +
                            "; expected positive counts with num_heads % num_kv_heads == 0");
  }
  if (!backend.supports_head_size(head_size)) {
    return invalid_argument(where + "head_size = " + std::to_string(head_size) +
                            " is not served (allowed: " + backend.supported_head_sizes_text() +
                            ")");
  }
  if (!backend.supports_dtype(dtype)) {
    return invalid_argument(where + "dtype " + std::string(dtype_name(dtype)) + "; expected " +
                            dtypes_text(backend) + " (f32 runs on the CPU backend)");
  }
  return ok_status();
}

Status check_device_vector(const TensorView& t, std::string_view what, int device) {
  if (!t.device().is_cuda() || t.device().index != device) {
    return invalid_argument(std::string(what) + " must be on cuda:" + std::to_string(device) +
                            ", got " + t.describe());
  }
  if (t.rank() >= 1 && t.size(0) > 1 && t.stride(t.rank() - 1) != 1) {
    return invalid_argument(std::string(what) + " must be contiguous in its last dim, got " +
                            t.describe());
  }
  return ok_status();
}

Status check_rows(const TensorView& t, std::string_view what, int64_t min_tokens, int64_t heads,
                  int64_t head_size, DType dtype, const Device& device) {
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {dtype}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(t, what, device));
  if (t.size(0) < min_tokens || t.size(1) != heads || t.size(2) != head_size || t.stride(2) != 1) {
    return invalid_argument(std::string(what) + " is " + t.describe() + "; expected [>= " +
                            std::to_string(min_tokens) + ", " + std::to_string(heads) + ", " +
                            std::to_string(head_size) + "] with a contiguous head dim");
  }
  return ok_status();
}

Status check_scale(const TensorView& scale, std::string_view what, const AttentionImplParams& p) {
  if (!scale.defined()) return ok_status();
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(scale, what, {DType::kF32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(scale, what, p.device));
  if (scale.numel() != 1 && scale.numel() != p.num_kv_heads) {
    return invalid_argument(
        std::string(what) + " has " + std::to_string(scale.numel()) +
        " elements; expected 1 or num_kv_heads = " + std::to_string(p.num_kv_heads));
  }
  return ok_status();
}

}  // namespace

StepInfo step_info(const BuilderParams& params, const CommonAttentionMetadata& meta) {
  return {params.device.index, backends::layer_spec(params), params.block_size, meta.num_reqs,
          meta.num_actual_tokens, meta.query_start_loc.data_as<const int32_t>()};
}

Status check_builder_params(const AttentionBackend& backend, const BuilderParams& p) {
  PAGEDATTN_RETURN_IF_ERROR(
      check_layer(backend, "builder", p.device, p.num_heads, p.num_kv_heads, p.head_size, p.dtype));
  if (!backend.supports_block_size(p.block_size) || p.block_size <= 0) {
    return invalid_argument(prefix(backend, "builder") +
                            "block_size = " + std::to_string(p.block_size) + "; expected " +
                            block_sizes_text(backend));
  }
  if (Status s = backends::check_limits(p); !s.ok()) {
    return invalid_argument(prefix(backend, "builder") + s.message());
  }
  if (p.num_sms < 0) {
    return invalid_argument(prefix(backend, "builder") + "num_sms = " + std::to_string(p.num_sms) +
                            " (allowed: 0 = the device's count, or a positive count to plan for)");
  }
  return ok_status();
}

Status check_step(const BuilderParams& params, const CommonAttentionMetadata& meta) {
  PAGEDATTN_RETURN_IF_ERROR(backends::check_step_limits(params, meta));
  // The builder does not know the cache size; block ids are checked where the table is on the host.
  const int64_t any_blocks = std::numeric_limits<int64_t>::max() / params.block_size;
  PAGEDATTN_RETURN_IF_ERROR(meta.validate(params.block_size, any_blocks));
  const int dev = params.device.index;
  PAGEDATTN_RETURN_IF_ERROR(check_device_vector(meta.query_start_loc, "query_start_loc", dev));
  PAGEDATTN_RETURN_IF_ERROR(check_device_vector(meta.seq_lens, "seq_lens", dev));
  return check_device_vector(meta.block_table_tensor, "block_table_tensor", dev);
}

Status check_impl_params(const AttentionBackend& backend, const AttentionImplParams& p) {
  PAGEDATTN_RETURN_IF_ERROR(
      check_layer(backend, "impl", p.device, p.num_heads, p.num_kv_heads, p.head_size, p.dtype));
  if (Status s = p.validate(); !s.ok())
    return invalid_argument(prefix(backend, "impl") + s.message());
  if (!backend.supports_attn_type(p.attn_type)) {
    return unimplemented(prefix(backend, "impl") +
                         "attn_type = " + std::string(attention_type_name(p.attn_type)) +
                         " is not supported (allowed: " + attn_types_text(backend) + ")");
  }
  return ok_status();
}

Status check_cache(const AttentionImplParams& p, DType cache_dtype, const KVCacheView& kv_cache) {
  return backends::check_kv_cache(kv_cache, {cache_dtype}, p.device, p.num_kv_heads, p.head_size,
                                  p.kv_layout);
}

Status check_cache_update(const AttentionImplParams& p, DType cache_dtype, const TensorView& key,
                          const TensorView& value, const KVCacheView& kv_cache) {
  PAGEDATTN_RETURN_IF_ERROR(check_cache(p, cache_dtype, kv_cache));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(key, "key", {p.dtype}));
  return expect_dtype(value, "value", {p.dtype});
}

Status check_forward(const AttentionImplParams& p, DType cache_dtype, const StepInfo& step,
                     const TensorView& query, const KVCacheView& kv_cache, const TensorView& output,
                     const TensorView& output_lse, const KVScales& scales, bool cache_optional) {
  const int64_t t = step.num_actual_tokens;
  PAGEDATTN_RETURN_IF_ERROR(backends::check_layer_spec(step.layer, p));
  if (step.device_index != p.device.index) {
    return invalid_argument("metadata was built for cuda:" + std::to_string(step.device_index) +
                            "; this layer runs on " + device_name(p.device));
  }
  PAGEDATTN_RETURN_IF_ERROR(check_rows(query, "query", t, p.num_heads, p.head_size,
                                       backends::forward_query_dtype(p, query), p.device));
  PAGEDATTN_RETURN_IF_ERROR(backends::check_query_scale(p, query, scales.q_scale, step.num_reqs));
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(output, "output", t, p.num_heads, p.head_size, p.dtype, p.device));
  if (output_lse.defined()) {
    PAGEDATTN_RETURN_IF_ERROR(expect_rank(output_lse, "output_lse", 2));
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(output_lse, "output_lse", {DType::kF32}));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(output_lse, "output_lse", p.device));
    if (output_lse.size(0) != p.num_heads || output_lse.size(1) < t ||
        (output_lse.size(1) > 1 && output_lse.stride(1) != 1)) {
      return invalid_argument("output_lse is " + output_lse.describe() + "; expected [" +
                              std::to_string(p.num_heads) + ", >= " + std::to_string(t) +
                              "] f32, contiguous rows");
    }
  }
  if (kv_cache.defined() || !cache_optional) {
    PAGEDATTN_RETURN_IF_ERROR(check_cache(p, cache_dtype, kv_cache));
    if (kv_cache.block_size() != step.block_size) {
      return invalid_argument("kv_cache block size " + std::to_string(kv_cache.block_size()) +
                              " differs from the builder's block_size " +
                              std::to_string(step.block_size));
    }
  }
  PAGEDATTN_RETURN_IF_ERROR(check_scale(scales.k_scale, "k_scale", p));
  PAGEDATTN_RETURN_IF_ERROR(check_scale(scales.v_scale, "v_scale", p));
  if (scales.k_scale.defined() != scales.v_scale.defined() ||
      (scales.k_scale.defined() && scales.k_scale.numel() != scales.v_scale.numel())) {
    return invalid_argument(
        "k_scale and v_scale must both be given (same size) or both be left out");
  }
  return ok_status();
}

Status check_new_tokens(const AttentionImplParams& p, const StepInfo& step, const TensorView& key,
                        const TensorView& value) {
  const int64_t t = step.num_actual_tokens;
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(key, "key", t, p.num_kv_heads, p.head_size, p.dtype, p.device));
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(value, "value", t, p.num_kv_heads, p.head_size, p.dtype, p.device));
  if (key.stride(0) != value.stride(0) || key.stride(1) != value.stride(1)) {
    return invalid_argument("key " + key.describe() + " and value " + value.describe() +
                            " must have the same strides");
  }
  return ok_status();
}

}  // namespace pagedattn::gpu
