// FLASHINFER's description, after vLLM's FlashInferBackend (research notes, vLLM backends 3.1),
// widened to what our kernels serve: pages 16 to 1024 on sm_80+ (vLLM allows large pages only on
// Blackwell), the head sizes FLASH_ATTN serves, sinks, ALiBi, non-causal, per-head FP8 scales.
// Decodes run the GQA-packed decode kernel (kernels/decode/), prefills the paged attention kernel.
#include "pagedattn/config.h"  // first: flashinfer_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/gpu_backend.h"
#include "kernels/attention/paged_attention.h"

namespace pagedattn {
namespace {

// vLLM lists pages 16, 32 and 64, each meaning "a multiple of"; ours take any multiple of 16
// (tested with pages 16 to 1024), which covers those.
class FlashInferBackend final : public gpu::GpuBackend {
 public:
  std::string_view name() const override { return "FLASHINFER"; }
  std::vector<std::string> kernel_generations() const override {
    if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV2)) return {};
    std::vector<std::string> out = {"decode (GQA-packed, sm_80+) for decodes",
                                    "v2 (mma.sync) for prefills"};
    if (kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
      out.push_back("v3 (wgmma + TMA, sm_90a) for prefills");
    }
    return out;
  }
  std::string kernel_generation_for(const AttentionSelectorConfig& config) const override {
    if (!config.compute_capability) return "";
    const int prefill = gpu::preferred_generation(*config.compute_capability, config.head_size);
    if (prefill == 0) return "";
    return prefill == 3 ? "the decode kernel for decodes; prefills v3 where it serves the launch, "
                          "else v2 (docs/kernels/README.md)"
                        : "the decode kernel for decodes, v2 for prefills";
  }
  // vLLM's upper bound stays.
  bool supports_compute_capability(ComputeCapability cc) const override {
    return GpuBackend::supports_compute_capability(cc) && cc <= ComputeCapability{12, 1};
  }

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flashinfer::make_builder(params);
#else
    (void)params;
    return not_built();
#endif
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flashinfer::make_impl(params);
#else
    (void)params;
    return not_built();
#endif
  }
};

}  // namespace

const AttentionBackend& flashinfer_backend() {
  static const FlashInferBackend backend;
  return backend;
}

}  // namespace pagedattn
