#include "backends/cache_layout.h"

#include <string>

namespace pagedattn::backends {

std::optional<KVCacheLayout> strided_layout(const TensorView& kv_cache) {
  if (kv_cache.size(2) <= 1 || kv_cache.size(3) <= 1) return std::nullopt;
  return kv_cache.stride(2) > kv_cache.stride(3) ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
}

Status check_cache_layout(const TensorView& kv_cache, KVCacheLayout kv_layout) {
  const std::optional<KVCacheLayout> shown = strided_layout(kv_cache);
  if (!shown || *shown == kv_layout) return ok_status();
  return invalid_argument("kv_layout = " + std::string(kv_cache_layout_name(kv_layout)) +
                          " (the layout the impl was made for) but kv_cache " +
                          kv_cache.describe() + " is strided " +
                          std::string(kv_cache_layout_name(*shown)) + " (token stride " +
                          std::to_string(kv_cache.stride(2)) + ", head stride " +
                          std::to_string(kv_cache.stride(3)) + ")");
}

}  // namespace pagedattn::backends
