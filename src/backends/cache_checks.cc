#include "backends/cache_checks.h"

#include <string>

namespace pagedattn::backends {

std::optional<KVCacheLayout> strided_layout(const TensorView& plane) {
  if (plane.size(1) <= 1 || plane.size(2) <= 1) return std::nullopt;
  return plane.stride(1) > plane.stride(2) ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
}

Status check_kv_cache(const KVCacheView& kv_cache, std::initializer_list<DType> dtypes,
                      const Device& device, int num_kv_heads, int head_size,
                      KVCacheLayout kv_layout) {
  if (!kv_cache.defined()) return invalid_argument("kv_cache is required");
  PAGEDATTN_RETURN_IF_ERROR(kv_cache.check());
  PAGEDATTN_RETURN_IF_ERROR(expect_device(kv_cache.key(), "kv_cache", device));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(kv_cache.key(), "kv_cache", dtypes));
  if (kv_cache.num_kv_heads() != num_kv_heads || kv_cache.head_size() != head_size) {
    return invalid_argument(kv_cache.describe() + " has " +
                            std::to_string(kv_cache.num_kv_heads()) + " KV heads of size " +
                            std::to_string(kv_cache.head_size()) + "; expected " +
                            std::to_string(num_kv_heads) + " of size " + std::to_string(head_size));
  }
  const std::optional<KVCacheLayout> shown = strided_layout(kv_cache.key());
  if (!shown || *shown == kv_layout) return ok_status();
  return invalid_argument("kv_layout = " + std::string(kv_cache_layout_name(kv_layout)) +
                          " (the layout the impl was made for) but " + kv_cache.describe() +
                          " is strided " + std::string(kv_cache_layout_name(*shown)) +
                          " (token stride " + std::to_string(kv_cache.key().stride(1)) +
                          ", head stride " + std::to_string(kv_cache.key().stride(2)) + ")");
}

}  // namespace pagedattn::backends
