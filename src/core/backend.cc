// AttentionBackend's shared behaviour: the capability predicates and validate_configuration,
// which follows vLLM's order and wording (vLLM's AttentionBackend.validate_configuration) and adds our own checks.
#include "pagedattn/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>

#include "pagedattn/device_info.h"

namespace pagedattn {
namespace {

std::string_view device_kind_name(DeviceKind kind) {
  return kind == DeviceKind::kCPU ? "cpu" : "cuda";
}

template <typename T, typename NameFn>
std::string join_names(const std::vector<T>& values, NameFn name) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ", ";
    out += name(v);
  }
  return out;
}

std::string block_sizes_text(const std::vector<MultipleOf>& sizes) {
  std::string bases;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i].base <= 1) return "any positive size";
    if (i > 0) bases += i + 1 == sizes.size() ? " or " : ", ";
    bases += std::to_string(sizes[i].base);
  }
  return sizes.empty() ? "any positive size" : "multiples of " + bases;
}

// The compute capability a CUDA config runs on: the given one, else the device's own.
std::optional<ComputeCapability> effective_capability(const AttentionSelectorConfig& config) {
  if (config.compute_capability) return config.compute_capability;
  for (const CudaDeviceInfo& info : cuda_devices()) {
    if (info.index == config.device.index) return info.capability;
  }
  return std::nullopt;
}

}  // namespace

std::string_view cg_support_name(AttentionCGSupport support) {
  switch (support) {
    case AttentionCGSupport::kNever: return "NEVER";
    case AttentionCGSupport::kUniformSingleTokenDecode: return "UNIFORM_SINGLE_TOKEN_DECODE";
    case AttentionCGSupport::kUniformBatch: return "UNIFORM_BATCH";
    case AttentionCGSupport::kAlways: return "ALWAYS";
  }
  return "UNKNOWN";
}

float AttentionImplParams::resolved_scale() const {
  if (scale > 0.0f) return scale;
  return head_size > 0 ? 1.0f / std::sqrt(static_cast<float>(head_size)) : 0.0f;
}

bool AttentionImplParams::causal_in_step(bool step_causal) const {
  return attn_type == AttentionType::kDecoder && step_causal;
}

Status AttentionImplParams::validate() const {
  const auto str = [](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
      return std::string(text);
    } else {
      return std::to_string(v);
    }
  };
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return invalid_argument("num_heads = " + str(num_heads) + ", num_kv_heads = " +
                            str(num_kv_heads) +
                            ": both must be positive and num_heads a multiple of num_kv_heads");
  }
  if (!std::isfinite(scale) || scale > kMaxScale) {
    return invalid_argument("scale = " + str(scale) + " is not allowed (allowed: finite, at most " +
                            str(kMaxScale) + "; <= 0 means 1/sqrt(head_size))");
  }
  if (!std::isfinite(logits_soft_cap)) {
    return invalid_argument("logits_soft_cap = " + str(logits_soft_cap) +
                            " must be finite (<= 0 disables it)");
  }
  for (const auto& [values, what] :
       {std::pair{&alibi_slopes, "alibi_slopes"}, std::pair{&sinks, "sinks"}}) {
    if (!values->empty() && static_cast<int>(values->size()) != num_heads) {
      return invalid_argument(std::string(what) + " has " + str(values->size()) +
                              " entries (allowed: none or num_heads = " + str(num_heads) + ")");
    }
    for (float v : *values) {
      if (!std::isfinite(v)) return invalid_argument(std::string(what) + " must be finite");
    }
  }
  if (sliding_window.left < -1 || sliding_window.right < -1) {
    return invalid_argument("sliding_window = (" + str(sliding_window.left) + ", " +
                            str(sliding_window.right) + "): each side must be >= -1");
  }
  if (kernel_generation != 0 && kernel_generation != 2 && kernel_generation != 3) {
    return invalid_argument("kernel_generation = " + str(kernel_generation) +
                            " (allowed: 0 = the backend's choice, 2, 3)");
  }
  if (fp8_tensor_cores && kv_cache_dtype != KVCacheDType::kFP8E4M3) {
    return invalid_argument("fp8_tensor_cores needs an e4m3 cache (kv_cache_dtype fp8 or "
                            "fp8_e4m3); kv_cache_dtype is " +
                            std::string(kv_cache_dtype_name(kv_cache_dtype)));
  }
  return ok_status();
}

bool AttentionBackend::supports_kv_cache_dtype(KVCacheDType kv,
                                               const AttentionSelectorConfig& config) const {
  const std::vector<KVCacheDType> allowed = supported_kv_cache_dtypes();
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), kv) != allowed.end();
}

bool AttentionBackend::supports_dtype(DType dtype) const {
  const std::vector<DType> allowed = supported_dtypes();
  return std::find(allowed.begin(), allowed.end(), dtype) != allowed.end();
}

bool AttentionBackend::supports_block_size(std::optional<int> block_size) const {
  if (!block_size) return true;
  const std::vector<MultipleOf> sizes = supported_kernel_block_sizes();
  if (sizes.empty()) return *block_size > 0;
  return std::any_of(sizes.begin(), sizes.end(),
                     [&](const MultipleOf& m) { return m.accepts(*block_size); });
}

int AttentionBackend::preferred_block_size(int default_block_size) const {
  if (supports_block_size(default_block_size)) return default_block_size;
  const std::vector<MultipleOf> sizes = supported_kernel_block_sizes();
  int best = 0;
  for (const MultipleOf& m : sizes) {
    if (best == 0 || m.base < best) best = m.base;
  }
  return best > 0 ? best : default_block_size;
}

std::vector<std::string> AttentionBackend::validate_configuration(
    const AttentionSelectorConfig& config) const {
  std::vector<std::string> reasons;
  if (std::optional<std::string> why = unavailable_reason()) reasons.push_back(*why);
  if (!supports_device(config.device.kind)) {
    reasons.push_back("device " + std::string(device_kind_name(config.device.kind)) +
                      " not supported");
  }
  if (!supports_head_size(config.head_size)) {
    reasons.push_back("head_size not supported (" + std::to_string(config.head_size) +
                      "; allowed: " + supported_head_sizes_text() + ")");
  }
  if (!supports_dtype(config.dtype)) {
    reasons.push_back(
        "dtype not supported (" + std::string(dtype_name(config.dtype)) + "; allowed: " +
        join_names(supported_dtypes(), [](DType d) { return std::string(dtype_name(d)); }) + ")");
  }
  if (!supports_kv_cache_dtype(config.kv_cache_dtype, config)) {
    reasons.push_back(
        "kv_cache_dtype not supported (" + std::string(kv_cache_dtype_name(config.kv_cache_dtype)) +
        "; allowed: " +
        join_names(supported_kv_cache_dtypes(),
                   [](KVCacheDType k) { return std::string(kv_cache_dtype_name(k)); }) +
        ")");
  }
  if (!supports_block_size(config.block_size)) {
    reasons.push_back("block_size not supported (" + std::to_string(*config.block_size) +
                      "; allowed: " + block_sizes_text(supported_kernel_block_sizes()) + ")");
  }
  if (config.has_sinks && !supports_sink()) reasons.push_back("attention sinks not supported");
  if (config.use_per_head_quant_scales && !supports_per_head_quant_scales()) {
    reasons.push_back("per-head quant scales not supported");
  }
  if (config.device.is_cuda()) {
    const std::optional<ComputeCapability> cc = effective_capability(config);
    if (!cc) {
      reasons.push_back("compute capability unknown (no CUDA device " + device_name(config.device) +
                        " found; give one to explain a choice)");
    } else if (!supports_compute_capability(*cc)) {
      reasons.push_back("compute capability not supported (" + compute_capability_name(*cc) + ")");
    }
  }
  if (!supports_attn_type(config.attn_type)) {
    reasons.push_back("attention type " + std::string(attention_type_name(config.attn_type)) +
                      " not supported");
  }
  if (!config.causal && !supports_non_causal()) {
    reasons.push_back("non-causal attention not supported");
  }
  if (config.use_alibi && !supports_alibi()) reasons.push_back("ALiBi not supported");
  if (config.use_sliding_window && !supports_sliding_window()) {
    reasons.push_back("sliding window not supported");
  }
  if (config.use_soft_cap && !supports_soft_cap()) {
    reasons.push_back("logits soft cap not supported");
  }
  if (config.dcp_world_size > 1 && !supports_dcp()) {
    reasons.push_back("decode context parallelism not supported (dcp_world_size = " +
                      std::to_string(config.dcp_world_size) + "; allowed: 1)");
  }
  if (config.dcp_world_size > 1 && config.use_alibi) {  // every backend's layer check refuses it
    reasons.push_back("ALiBi under decode context parallelism (a rank's keys are not at "
                      "contiguous positions)");
  }
  if (std::optional<std::string> why = supports_combination(config)) reasons.push_back(*why);
  return reasons;
}

StatusOr<KVCacheShape> AttentionBackend::get_kv_cache_shape(int64_t num_blocks, int block_size,
                                                            int num_kv_heads, int head_size,
                                                            KVCacheDType cache_dtype) const {
  return pagedattn::get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                                       cache_dtype);
}

}  // namespace pagedattn
