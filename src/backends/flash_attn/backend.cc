// FLASH_ATTN's description, after vLLM's FlashAttentionBackend (vllm/v1/attention/backends/flash_attn.py),
// adjusted to what our kernels do: the v2 kernel dequantizes FP8 in registers (both formats) and
// handles sinks and per-head scales on sm_80+, which vLLM only offers with FA3.
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/gpu_backend.h"
#include "kernels/attention/paged_attention.h"

namespace pagedattn {
namespace {

class FlashAttnBackend final : public gpu::GpuBackend {
 public:
  std::string_view name() const override { return "FLASH_ATTN"; }
  std::vector<std::string> kernel_generations() const override {
    std::vector<std::string> out;
    if (kernels::paged_attention_generation_built(kernels::KernelGeneration::kV2)) {
      out.push_back("v2 (mma.sync, sm_80+)");
    }
    if (kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
      out.push_back("v3 (wgmma + TMA, sm_90a)");
    }
    return out;
  }
  std::string kernel_generation_for(const AttentionSelectorConfig& config) const override {
    if (!config.compute_capability) return "";
    switch (gpu::preferred_generation(*config.compute_capability, config.head_size)) {
      case 3: return "v3 where it serves the launch, v2 for the rest (docs/kernels/README.md)";
      case 2: return "v2";
      default: return "";
    }
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
    return not_built();
#endif
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flash_attn::make_impl(params);
#else
    return not_built();
#endif
  }
};

}  // namespace

const AttentionBackend& flash_attn_backend() {
  static const FlashAttnBackend backend;
  return backend;
}

}  // namespace pagedattn
