// Backend selection (vLLM's CudaPlatform.get_attn_backend_cls in vllm/platforms/cuda.py).
#include "pagedattn/selector.h"

#include <algorithm>
#include <string>

#include "pagedattn/dcp_heads.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn {
namespace {

std::string join_reasons(const std::vector<std::string>& reasons) {
  std::string out;
  for (const std::string& r : reasons) {
    if (!out.empty()) out += "; ";
    out += r;
  }
  return out;
}

std::string known_backend_names() {
  std::string out;
  for (const AttentionBackend* backend : registered_backends()) {
    if (!out.empty()) out += ", ";
    out += std::string(backend->name());
  }
  return out + " (or their lower-case aliases: flash_attn, flashinfer, cpu_attn, cpu)";
}

BackendSelection chosen(const AttentionBackend& backend, const AttentionSelectorConfig& config,
                        std::vector<BackendRejection> rejected) {
  BackendSelection selection;
  selection.backend = &backend;
  selection.rejected = std::move(rejected);
  selection.kv_cache_layout = backend.required_kv_cache_layout().value_or(get_kv_cache_layout());
  selection.block_size = config.block_size.value_or(backend.preferred_block_size(16));
  return selection;
}

// Backends outside the device's priority list are never candidates there, but an engine author
// asking "why not FLASH_ATTN?" on a CPU machine deserves its reasons too.
void append_other_backends(const AttentionSelectorConfig& config,
                           const std::vector<std::string_view>& priority,
                           std::vector<BackendRejection>& rejected) {
  for (const AttentionBackend* backend : registered_backends()) {
    if (std::find(priority.begin(), priority.end(), backend->name()) != priority.end()) continue;
    std::vector<std::string> reasons = backend->validate_configuration(config);
    if (!reasons.empty()) rejected.push_back({std::string(backend->name()), std::move(reasons)});
  }
}

}  // namespace

std::vector<std::string_view> backend_priority(const Device& device) {
  if (device.is_cuda()) return {"FLASH_ATTN", "FLASHINFER"};
  return {"CPU_ATTN"};
}

StatusOr<BackendSelection> select_backend(const AttentionSelectorConfig& config,
                                          std::optional<std::string_view> forced_backend) {
  // A model no backend can run, whatever the machine: whole GQA groups of positive head counts.
  if (config.num_heads <= 0 || config.num_kv_heads <= 0 ||
      config.num_heads % config.num_kv_heads != 0) {
    return invalid_argument(
        "num_heads = " + std::to_string(config.num_heads) +
        " must be a positive multiple of num_kv_heads = " + std::to_string(config.num_kv_heads));
  }
  // DCP: a group size no deployment has, or rank head slices that would straddle KV-head groups.
  if (config.dcp_world_size < 1 || config.dcp_world_size > DcpShard::kMaxWorldSize) {
    return invalid_argument("dcp_world_size = " + std::to_string(config.dcp_world_size) +
                            " (allowed: 1 to " + std::to_string(DcpShard::kMaxWorldSize) + ")");
  }
  PAGEDATTN_RETURN_IF_ERROR(
      check_dcp_head_split(config.num_heads, config.num_kv_heads, config.dcp_world_size));
  // On CUDA without a compute capability, validate_configuration uses the device's own.
  if (forced_backend) {
    const AttentionBackend* backend = find_backend(*forced_backend);
    if (backend == nullptr) {
      return not_found("unknown attention backend '" + std::string(*forced_backend) +
                       "'; known: " + known_backend_names());
    }
    const std::vector<std::string> reasons = backend->validate_configuration(config);
    if (!reasons.empty()) {
      return invalid_argument("selected backend " + std::string(backend->name()) +
                              " is not valid for this configuration on " +
                              device_name(config.device) + ": " + join_reasons(reasons));
    }
    return chosen(*backend, config, {});
  }

  const std::vector<std::string_view> priority = backend_priority(config.device);
  std::vector<BackendRejection> rejected;
  for (std::string_view name : priority) {
    const AttentionBackend* backend = find_backend(name);
    if (backend == nullptr) continue;
    std::vector<std::string> reasons = backend->validate_configuration(config);
    if (reasons.empty()) {
      append_other_backends(config, priority, rejected);
      return chosen(*backend, config, std::move(rejected));
    }
    rejected.push_back({std::string(name), std::move(reasons)});
  }
  append_other_backends(config, priority, rejected);
  std::string message =
      "no attention backend can serve this configuration on " + device_name(config.device) + ":";
  for (const BackendRejection& r : rejected) {
    message += " " + r.backend + " [" + join_reasons(r.reasons) + "]";
  }
  return invalid_argument(message);
}

}  // namespace pagedattn
