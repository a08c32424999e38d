// FLASHINFER's description, after vLLM's FlashInferBackend (research notes, vLLM backends 3.1),
// widened to what our kernels serve: pages 16 to 1024 on sm_80+ (vLLM allows large pages only on
// Blackwell), the head sizes FLASH_ATTN serves, sinks, ALiBi, non-causal, per-head FP8 scales.
// Decodes run the GQA-packed decode kernel (kernels/decode/), prefills the paged attention kernel.
#include "pagedattn/config.h"  // first: flashinfer_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/gpu/head_sizes.h"

namespace pagedattn {
namespace {

class FlashInferBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "FLASHINFER"; }
  std::vector<DType> supported_dtypes() const override { return {DType::kF16, DType::kBF16}; }
  std::vector<KVCacheDType> supported_kv_cache_dtypes() const override {
    return {KVCacheDType::kAuto, KVCacheDType::kFloat16, KVCacheDType::kBFloat16,
            KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2};
  }
  // vLLM lists 16, 32 and 64, each meaning "a multiple of"; our kernels take any multiple of 16
  // (tested with pages 16 to 1024), which covers those.
  std::vector<MultipleOf> supported_kernel_block_sizes() const override { return {MultipleOf{16}}; }
  bool supports_head_size(int head_size) const override { return gpu::serves_head_size(head_size); }
  std::string supported_head_sizes_text() const override { return gpu::served_head_sizes_text(); }
  bool supports_sink() const override { return true; }
  bool supports_alibi() const override { return true; }
  bool supports_sliding_window() const override { return true; }
  bool supports_soft_cap() const override { return true; }
  bool supports_non_causal() const override { return true; }
  bool supports_per_head_quant_scales() const override { return true; }
  bool supports_attn_type(AttentionType type) const override {
    return type == AttentionType::kDecoder || type == AttentionType::kEncoder ||
           type == AttentionType::kEncoderOnly;
  }
  bool supports_device(DeviceKind kind) const override { return kind == DeviceKind::kCUDA; }
  // Our kernels need mma.sync bf16 (sm_80+); vLLM's upper bound stays.
  bool supports_compute_capability(ComputeCapability cc) const override {
    return cc >= ComputeCapability{8, 0} && cc <= ComputeCapability{12, 1};
  }
  std::optional<std::string> unavailable_reason() const override {
    if (PAGEDATTN_WITH_CUDA) return std::nullopt;
    return "not built in this version (built without CUDA)";
  }

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flashinfer::make_builder(params);
#else
    (void)params;
    return unimplemented("FLASHINFER is not built in this version (built without CUDA)");
#endif
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const override {
#if PAGEDATTN_WITH_CUDA
    return flashinfer::make_impl(params);
#else
    (void)params;
    return unimplemented("FLASHINFER is not built in this version (built without CUDA)");
#endif
  }
};

}  // namespace

const AttentionBackend& flashinfer_backend() {
  static const FlashInferBackend backend;
  return backend;
}

}  // namespace pagedattn
