// What both GPU backends' kernels serve, described once: f16/bf16 queries; auto, f16, bf16 and both
// FP8 caches with per-tensor or per-head scales; pages that are multiples of 16; the GPU head sizes
// (head_sizes.h); sinks, ALiBi, windows, soft cap and non-causal; decoder and encoder attention; CUDA
// devices of compute capability 8.0 and up (mma.sync bf16). Each backend adds its name, factories
// and what differs. Host code, built with or without CUDA.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/gpu/head_sizes.h"
#include "pagedattn/backend.h"
#include "pagedattn/config.h"

namespace pagedattn::gpu {

class GpuBackend : public AttentionBackend {
 public:
  static constexpr int kBlockSizeBase = 16;

  std::vector<DType> supported_dtypes() const override { return {DType::kF16, DType::kBF16}; }
  std::vector<KVCacheDType> supported_kv_cache_dtypes() const override {
    return {KVCacheDType::kAuto, KVCacheDType::kFloat16, KVCacheDType::kBFloat16,
            KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2};
  }
  std::vector<MultipleOf> supported_kernel_block_sizes() const override {
    return {MultipleOf{kBlockSizeBase}};
  }
  bool supports_head_size(int head_size) const override { return serves_head_size(head_size); }
  std::string supported_head_sizes_text() const override { return served_head_sizes_text(); }
  bool supports_sink() const override { return true; }
  bool supports_alibi() const override { return true; }
  bool supports_sliding_window() const override { return true; }
  bool supports_soft_cap() const override { return true; }
  bool supports_non_causal() const override { return true; }
  bool supports_per_head_quant_scales() const override { return true; }
  // With a group on the layer's device (an in-process device group or NCCL): backends/gpu/dcp_*.
  bool supports_dcp() const override { return true; }
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

 protected:
  // The factories' answer in a build without CUDA.
  Status not_built() const {
    return unimplemented(std::string(name()) + " is not built in this version (built without CUDA)");
  }
};

}  // namespace pagedattn::gpu
