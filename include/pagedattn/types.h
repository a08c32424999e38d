// Element types, devices, KV-cache dtypes and layouts, attention types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pagedattn/status.h"

namespace pagedattn {

enum class DType { kF32, kF16, kBF16, kFP8E4M3, kFP8E5M2, kU8, kI32, kI64 };

size_t dtype_size(DType dtype);         // bytes per element
std::string_view dtype_name(DType dtype);  // "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "u8", "i32", "i64"
// Accepts the short names above and the long ones ("float32", "float16", "half", "bfloat16", ...).
StatusOr<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);
bool is_fp8(DType dtype);

// The KV-cache dtype strings vLLM uses. `auto` stores the model dtype; `fp8` means `fp8_e4m3`.
enum class KVCacheDType { kAuto, kFloat16, kBFloat16, kFP8E4M3, kFP8E5M2 };

std::string_view kv_cache_dtype_name(KVCacheDType kv);  // "auto", "float16", ...
// Accepts "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2".
StatusOr<KVCacheDType> parse_kv_cache_dtype(std::string_view name);
// The element type stored in the cache for a model running in `model_dtype`.
DType kv_cache_storage_dtype(KVCacheDType kv, DType model_dtype);
inline bool is_fp8(KVCacheDType kv) {
  return kv == KVCacheDType::kFP8E4M3 || kv == KVCacheDType::kFP8E5M2;
}

enum class DeviceKind { kCPU, kCUDA };

struct Device {
  DeviceKind kind = DeviceKind::kCPU;
  int index = 0;
  static Device cpu() { return {DeviceKind::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::kCUDA, index}; }
  bool is_cpu() const { return kind == DeviceKind::kCPU; }
  bool is_cuda() const { return kind == DeviceKind::kCUDA; }
  friend bool operator==(const Device&, const Device&) = default;
};
std::string device_name(const Device& device);  // "cpu", "cuda:0"

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  int as_int() const { return major * 10 + minor; }  // 9.0 -> 90
  friend auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
};
std::string compute_capability_name(ComputeCapability cc);  // "9.0"
StatusOr<ComputeCapability> parse_compute_capability(std::string_view text);  // "9.0", "8.6"

enum class KVCacheLayout { kNHD, kHND };
std::string_view kv_cache_layout_name(KVCacheLayout layout);
StatusOr<KVCacheLayout> parse_kv_cache_layout(std::string_view name);  // "NHD" / "HND"

enum class AttentionType { kDecoder, kEncoder, kEncoderOnly, kEncoderDecoder };
std::string_view attention_type_name(AttentionType type);  // vLLM's: "decoder", "encoder_only", ...
StatusOr<AttentionType> parse_attention_type(std::string_view name);

// Sliding window (left, right) as in semantics.md; -1 means unbounded on that side.
struct SlidingWindow {
  int left = -1;
  int right = -1;
  bool enabled() const { return left >= 0 || right >= 0; }
  friend bool operator==(const SlidingWindow&, const SlidingWindow&) = default;
};

}  // namespace pagedattn
