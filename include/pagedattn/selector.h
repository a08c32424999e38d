// Backend selection: walk the priority list for the device, validate each backend, pick the first
// valid one and report every rejection with its reasons. A forced backend never falls back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagedattn/backend.h"

namespace pagedattn {

struct BackendRejection {
  std::string backend;
  std::vector<std::string> reasons;
};

struct BackendSelection {
  const AttentionBackend* backend = nullptr;
  // Every backend that cannot serve the config: the device's priority list first (in order), then
  // the other registered backends (e.g. FLASH_ATTN's reasons on a CPU machine).
  std::vector<BackendRejection> rejected;
  KVCacheLayout kv_cache_layout = KVCacheLayout::kNHD;  // the backend's required layout, else the default
  int block_size = 16;  // the configured size, else the backend's preferred one
};

// CUDA: FLASH_ATTN, FLASHINFER; CPU: CPU_ATTN.
std::vector<std::string_view> backend_priority(const Device& device);

// An InvalidArgument, before any backend is asked, when num_heads is not a positive multiple of
// num_kv_heads, when dcp_world_size is outside [1, 1024], or when the DCP ranks' head slices would
// straddle KV-head groups (check_dcp_head_split). A backend that does not serve DCP is rejected
// with its reason like any other feature.
StatusOr<BackendSelection> select_backend(const AttentionSelectorConfig& config,
                                          std::optional<std::string_view> forced_backend = std::nullopt);

}  // namespace pagedattn
