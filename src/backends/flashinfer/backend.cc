// FLASHINFER's description, after vLLM's FlashInferBackend (research/vllm_backends.md 3.1). No
// FlashInfer-style kernels are built yet, so validation always says so and make_* refuse.
#include "backends/factories.h"

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
  // vLLM lists the ints 16, 32, 64 and treats each as "a multiple of".
  std::vector<MultipleOf> supported_kernel_block_sizes() const override {
    return {MultipleOf{16}, MultipleOf{32}, MultipleOf{64}};
  }
  bool supports_head_size(int head_size) const override {
    return head_size == 64 || head_size == 128 || head_size == 256;
  }
  std::string supported_head_sizes_text() const override { return "64, 128, 256"; }
  // Sinks need vLLM's TRT-LLM path (SM100 only); ALiBi, non-causal and per-head scales are not
  // offered by vLLM's FlashInfer backend.
  bool supports_sliding_window() const override { return true; }
  bool supports_soft_cap() const override { return true; }
  bool supports_device(DeviceKind kind) const override { return kind == DeviceKind::kCUDA; }
  bool supports_compute_capability(ComputeCapability cc) const override {
    return cc >= ComputeCapability{7, 5} && cc <= ComputeCapability{12, 1};
  }
  // vLLM requires HND on SM 10.x; that depends on the device, which this hook does not see. It
  // will matter once the backend is built.
  std::optional<std::string> unavailable_reason() const override {
    return "not built in this version";
  }

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams&) const override {
    return unimplemented("FLASHINFER is not built in this version");
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams&) const override {
    return unimplemented("FLASHINFER is not built in this version");
  }
};

}  // namespace

const AttentionBackend& flashinfer_backend() {
  static const FlashInferBackend backend;
  return backend;
}

}  // namespace pagedattn
