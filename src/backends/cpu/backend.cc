// CPU_ATTN's description: what the portable host backend serves. Execution is in cpu/*.cc.
// Cascade (a shared prefix passed to build()) runs with every feature it serves, ALiBi and sliding
// windows included: its prefix and suffix passes keep absolute query and key positions, so the
// result is exact plain attention (tests/unit/test_cpu_cascade.cc). Decode context parallelism
// runs with ranks as threads over a host communicator (dcp_forward.cc, docs/dcp.md).
#include "backends/cpu/cpu_backend.h"
#include "backends/factories.h"

namespace pagedattn {
namespace {

class CpuAttnBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "CPU_ATTN"; }
  std::vector<std::string> kernel_generations() const override {
    return {"cpu (float32 accumulation, threads)"};
  }
  std::string kernel_generation_for(const AttentionSelectorConfig& config) const override {
    return "cpu";
  }
  std::vector<DType> supported_dtypes() const override {
    return {DType::kF32, DType::kF16, DType::kBF16};
  }
  std::vector<KVCacheDType> supported_kv_cache_dtypes() const override {
    return {KVCacheDType::kAuto, KVCacheDType::kFloat16, KVCacheDType::kBFloat16,
            KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2};
  }
  std::vector<MultipleOf> supported_kernel_block_sizes() const override { return {MultipleOf{1}}; }
  bool supports_head_size(int head_size) const override {
    return head_size >= 32 && head_size <= 512 && head_size % 8 == 0;
  }
  std::string supported_head_sizes_text() const override { return "multiples of 8 from 32 to 512"; }
  bool supports_sink() const override { return true; }
  bool supports_alibi() const override { return true; }
  bool supports_sliding_window() const override { return true; }
  bool supports_soft_cap() const override { return true; }
  bool supports_non_causal() const override { return true; }
  bool supports_per_head_quant_scales() const override { return true; }
  bool supports_dcp() const override { return true; }
  bool supports_attn_type(AttentionType type) const override {
    // Cross-attention (encoder_decoder) needs encoder lengths the metadata does not carry.
    return type == AttentionType::kDecoder || type == AttentionType::kEncoder ||
           type == AttentionType::kEncoderOnly;
  }
  bool supports_device(DeviceKind kind) const override { return kind == DeviceKind::kCPU; }

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams& params) const override {
    return cpu::make_builder(params);
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const override {
    return cpu::make_impl(params);
  }
};

}  // namespace

const AttentionBackend& cpu_attn_backend() {
  static const CpuAttnBackend backend;
  return backend;
}

}  // namespace pagedattn
