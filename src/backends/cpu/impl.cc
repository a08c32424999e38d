// CPU_ATTN's AttentionImpl: checks the layer's parameters once, then serves cache writes and
// forward calls (cache_update.cc, forward.cc).
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_impl.h"
#include "backends/query_checks.h"
#include "dcp/layer_checks.h"
#include "pagedattn/communicator.h"
#include "pagedattn/ops.h"

namespace pagedattn::cpu {
namespace {

class CpuAttentionImpl final : public AttentionImpl {
 public:
  explicit CpuAttentionImpl(AttentionImplParams params) : AttentionImpl(std::move(params)) {}

  std::string_view kernel_generation() const override { return "cpu"; }

  Status do_kv_cache_update(const TensorView& key, const TensorView& value,
                            const KVCacheView& kv_cache, const TensorView& slot_mapping,
                            const KVScales& scales, StreamHandle stream) override {
    return write_kv_cache(params_, key, value, kv_cache, slot_mapping, scales);
  }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const KVCacheView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    const auto* md = dynamic_cast<const CpuAttentionMetadata*>(&metadata);
    if (md == nullptr) {
      return invalid_argument("metadata was not built by CPU_ATTN's metadata builder");
    }
    PAGEDATTN_RETURN_IF_ERROR(
        backends::check_query_scale(params_, query, scales.q_scale, md->num_reqs));
    if (!query.defined() || query.dtype() != DType::kFP8E4M3) {
      return run_forward(params_, query, key, value, kv_cache, *md, output, output_lse, scales);
    }
    // An e4m3 query is read in the layer's dtype (dequantize_fp8_query's values).
    PAGEDATTN_RETURN_IF_ERROR(expect_rank(query, "query", 3));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(query, "query", Device::cpu()));
    const int64_t shape[3] = {query.size(0), query.size(1), query.size(2)};
    std::vector<std::byte> buffer(static_cast<size_t>(shape[0] * shape[1] * shape[2]) *
                                  dtype_size(params_.dtype));
    const TensorView dequantized(buffer.data(), params_.dtype, Device::cpu(), shape);
    TensorView starts;
    if (scales.q_scale.defined() && scales.q_scale.rank() == 2) {
      starts = TensorView(const_cast<int32_t*>(md->query_start_loc.data()), DType::kI32,
                          Device::cpu(), {int64_t{md->num_reqs} + 1});
    }
    PAGEDATTN_RETURN_IF_ERROR(dequantize_fp8_query(dequantized, query, scales.q_scale, starts));
    return run_forward(params_, dequantized, key, value, kv_cache, *md, output, output_lse,
                       {scales.k_scale, scales.v_scale});
  }
};

Status validate_params(const AttentionImplParams& p) {
  if (!p.device.is_cpu()) {
    return invalid_argument("device = " + device_name(p.device) + ": CPU_ATTN runs on cpu only");
  }
  PAGEDATTN_RETURN_IF_ERROR(p.validate());
  PAGEDATTN_RETURN_IF_ERROR(check_served(p.head_size, p.dtype));
  if (p.attn_type != AttentionType::kDecoder && p.attn_type != AttentionType::kEncoder &&
      p.attn_type != AttentionType::kEncoderOnly) {
    return unimplemented("attn_type = " + std::string(attention_type_name(p.attn_type)) +
                         " is not supported by CPU_ATTN (allowed: decoder, encoder, encoder_only)");
  }
  PAGEDATTN_RETURN_IF_ERROR(dcp::check_dcp_layer(p));
  if (p.dcp_group != nullptr && !p.dcp_group->device().is_cpu()) {
    return invalid_argument("dcp_group's buffers live on " + device_name(p.dcp_group->device()) +
                            ": CPU_ATTN combines host buffers (allowed: a host communicator, "
                            "such as make_in_process_group's)");
  }
  if (p.kernel_generation != 0) {
    return unimplemented("kernel_generation = " + std::to_string(p.kernel_generation) +
                         " is not served by CPU_ATTN (allowed: 0; its one generation is cpu)");
  }
  return ok_status();
}

}  // namespace

Status check_served(int head_size, DType dtype) {
  if (head_size < 32 || head_size > 512 || head_size % 8 != 0) {
    return invalid_argument(
        "head_size = " + std::to_string(head_size) +
        " is not supported by CPU_ATTN (allowed: multiples of 8 from 32 to 512)");
  }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return invalid_argument("dtype = " + std::string(dtype_name(dtype)) +
                            " is not supported by CPU_ATTN (allowed: f32, f16, bf16)");
  }
  return ok_status();
}

DType cache_storage_dtype(const AttentionImplParams& params) {
  return kv_cache_storage_dtype(params.kv_cache_dtype, params.dtype);
}

Status check_scales(const KVScales& scales, int num_kv_heads) {
  for (const auto& [scale, what] :
       {std::pair{&scales.k_scale, "k_scale"}, std::pair{&scales.v_scale, "v_scale"}}) {
    if (!scale->defined()) continue;
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(*scale, what, {DType::kF32}));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(*scale, what, Device::cpu()));
    if (scale->rank() != 1 || (scale->size(0) != 1 && scale->size(0) != num_kv_heads)) {
      return invalid_argument(std::string(what) + " is " + scale->describe() +
                              " (allowed: f32 [1] per tensor or [" + std::to_string(num_kv_heads) +
                              "] per KV head)");
    }
    for (int64_t i = 0; i < scale->size(0); ++i) {
      const float v = scale->data_as<const float>()[i * scale->stride(0)];
      if (!std::isfinite(v) || v <= 0.0f) {
        return invalid_argument(std::string(what) + "[" + std::to_string(i) +
                                "] = " + std::to_string(v) + " must be finite and positive");
      }
    }
  }
  return ok_status();
}

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(validate_params(params));
  return std::unique_ptr<AttentionImpl>(std::make_unique<CpuAttentionImpl>(params));
}

}  // namespace pagedattn::cpu
