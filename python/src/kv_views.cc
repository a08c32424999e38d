#include "kv_views.h"

#include <string>

#include "errors.h"

namespace pagedattn::python {

KVCacheView paged_kv_view(const TensorView& k, const TensorView& v) {
  KVCacheView cache(k, v);
  check(cache.check());
  return cache;
}

TensorView scale_view(const TensorView& s, const char* name) {
  if (!s.defined()) return s;
  const int64_t one[] = {1}, unit[] = {1};
  if (s.rank() == 0) return TensorView(s.data(), s.dtype(), s.device(), one, unit);
  if (s.rank() != 2) return s;  // [1] or [Hkv]: the library checks it
  if (s.size(0) > 1 && s.stride(0) != 0) {
    raise_value_error(std::string(name) + " is " + s.describe() + " with a scale per request; expected one "
                      "scale per tensor or per KV head (broadcast over requests)");
  }
  if (s.size(1) == 1 || s.stride(1) == 0) return TensorView(s.data(), s.dtype(), s.device(), one, unit);
  const int64_t heads[] = {s.size(1)}, stride[] = {s.stride(1)};
  return TensorView(s.data(), s.dtype(), s.device(), heads, stride);
}

}  // namespace pagedattn::python
