#include "backends/common_prefix.h"

#include <string>

namespace pagedattn::backends {
Status check_cascade_features(std::string_view backend, int cpl, bool use_alibi,
                              bool use_sliding_window, CascadeFeatures served) {
  if (cpl <= 0) return ok_status();
  const char* feature = nullptr;
  if (use_alibi && !served.alibi) feature = "ALiBi (use_alibi)";
  if (use_sliding_window && !served.sliding_window) feature = "a sliding window";
  if (feature == nullptr) return ok_status();
  return invalid_argument("common_prefix_len = " + std::to_string(cpl) + ": " +
                          std::string(backend) + " cannot run cascade attention with " + feature +
                          "; pass 0 (use_cascade_attention never asks for it with this feature)");
}

Status check_cascade_deterministic(std::string_view backend, int cpl, bool deterministic) {
  if (cpl <= 0 || !deterministic) return ok_status();
  return invalid_argument("common_prefix_len = " + std::to_string(cpl) + ": " +
                          std::string(backend) +
                          " was built deterministic (batch invariant), which runs no cascade "
                          "attention; pass 0 (use_cascade_attention never asks for it then)");
}

}  // namespace pagedattn::backends
