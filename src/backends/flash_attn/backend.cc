// FLASH_ATTN's description, after vLLM's FlashAttentionBackend (vllm/v1/attention/backends/flash_attn.py),
// adjusted to what our kernels do: the v2 kernel dequantizes FP8 in registers (both formats) and
// handles sinks and per-head scales on sm_80+, which vLLM only offers with FA3.
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/gpu/head_sizes.h"

namespace pagedattn {
namespace {

constexpr int kBlockSizeBase = 16;

class FlashAttnBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "FLASH_ATTN"; }
  std::vector<DType> supported_dtypes() const override { return {DType::kF16, DType::kBF16}; }
  std::vector<KVCacheDType> supported_kv_cache_dtypes() const override {
    return {KVCacheDType::kAuto, KVCacheDType::kFloat16, KVCacheDType::kBFloat16,
            KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2};
  }
  std::vector<MultipleOf> supported_kernel_block_sizes() const override {
    return {MultipleOf{kBlockSizeBase}};
  }
  bool supports_head_size(int head_size) const override { return gpu::serves_head_size(head_size); }
  std::string supported_head_sizes_text() const override { return gpu::served_head_sizes_text(); }
  bool supports_sink() const override { return true; }
  bool supports_alibi() const override { return true; }
  bool supports_sliding_window() const override { return true; }
  bool supports_soft_cap() const override { return true; }
  bool supports_non_causal() const override { return true; }
  bool supports_per_head_quant_scales() const override { return true; }
  bool supports_attn_type(AttentionType type) const override {
    // Cross-attention needs encoder sequence lengths, which CommonAttentionMetadata does not carry.
    return type == AttentionType::kDecoder || type == AttentionType::kEncoder ||
           type == AttentionType::kEncoderOnly;
  }
  bool supports_device(DeviceKind kind) const override { return kind == DeviceKind::kCUDA; }
  bool supports_compute_capability(ComputeCapability cc) const override {
    return cc >= ComputeCapability{8, 0};
  }
  std::optional<std::string> unavailable_reason() const override {
    if (PAGEDATTN_WITH_CUDA) return std::nullopt;
    return "not built in this version (built without CUDA)";
  }

  StatusOr<KVCacheShape> get_kv_cache_shape(int64_t num_blocks, int block_size, int num_kv_heads,
                                            int head_size,
                                            KVCacheDType cache_dtype) const override {
    if (block_size % kBlockSizeBase != 0) {
      return invalid_argument("Block size must be a multiple of 16. Got " +
                              std::to_string(block_size) + ".");
    }
    return pagedattn::get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                                         cache_dtype);
  }

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flash_attn::make_builder(params);
#else
    return unimplemented("FLASH_ATTN is not built in this version (built without CUDA)");
#endif
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flash_attn::make_impl(params);
#else
    return unimplemented("FLASH_ATTN is not built in this version (built without CUDA)");
#endif
  }
};

}  // namespace

const AttentionBackend& flash_attn_backend() {
  static const FlashAttnBackend backend;
  return backend;
}

}  // namespace pagedattn
