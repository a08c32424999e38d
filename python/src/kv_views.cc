#include "kv_views.h"

#include <cstdint>
#include <string>

#include "errors.h"

namespace pagedattn::python {

TensorView paged_kv_view(const TensorView& k, const TensorView& v) {
  if (k.rank() != 4) {
    raise_value_error("key_cache is " + k.describe() + "; expected [num_blocks, block_size, num_kv_heads, head_size]");
  }
  const bool same = v.rank() == 4 && v.dtype() == k.dtype() && v.device() == k.device() &&
                    std::equal(k.shape().begin(), k.shape().end(), v.shape().begin()) &&
                    std::equal(k.strides().begin(), k.strides().end(), v.strides().begin());
  if (!same) {
    raise_value_error("value_cache is " + v.describe() + "; expected the dtype, device, shape and strides of "
                      "key_cache " + k.describe());
  }
  const auto elem = static_cast<int64_t>(dtype_size(k.dtype()));
  const int64_t distance = static_cast<char*>(v.data()) - static_cast<char*>(k.data());
  if (distance % elem != 0) {
    raise_value_error("value_cache must lie a whole number of elements away from key_cache");
  }
  const int64_t shape[] = {k.size(0), 2, k.size(1), k.size(2), k.size(3)};
  const int64_t strides[] = {k.stride(0), distance / elem, k.stride(1), k.stride(2), k.stride(3)};
  return TensorView(k.data(), k.dtype(), k.device(), shape, strides);
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
