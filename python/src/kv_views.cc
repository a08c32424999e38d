#include "kv_views.h"

#include <cstdint>
#include <string>
#include <utility>

#include "errors.h"

namespace pagedattn::python {

namespace {

// a * b + c in 64 bits; ValueError naming the caches when it leaves int64.
int64_t mul_add(int64_t a, int64_t b, int64_t c) {
  int64_t product = 0, sum = 0;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum)) {
    raise_value_error("key_cache / value_cache: the element offsets of the two planes overflow 64 bits");
  }
  return sum;
}

int64_t add(int64_t a, int64_t b) { return mul_add(a, 1, b); }

// The lowest and highest element offsets (from the plane's base) one plane of `t` reaches.
std::pair<int64_t, int64_t> plane_reach(const TensorView& t) {
  int64_t low = 0, high = 0;
  for (int d = 0; d < t.rank(); ++d) {
    if (t.size(d) == 0) return {0, -1};  // an empty plane reaches nothing
    const int64_t span = mul_add(t.size(d) - 1, t.stride(d), 0);
    if (span < 0) {
      low = add(low, span);
    } else {
      high = add(high, span);
    }
  }
  return {low, high};
}

}  // namespace

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
    raise_value_error("value_cache must lie a whole number of elements away from key_cache (it is " +
                      std::to_string(distance) + " bytes away)");
  }
  const int64_t plane = distance / elem;
  // Everything either plane can reach, from K's base, must have a 64-bit offset.
  const auto [low, high] = plane_reach(k);
  add(plane, low);
  add(plane, high);
  if (k.device().is_cuda() && (plane < 0 || plane > INT32_MAX)) {
    // The GPU kernels reach V from K's base by one plane stride (64-bit block offsets, so any cache
    // size): until they take a base pointer per plane, that stride must be in [0, 2^31) elements.
    raise_value_error("value_cache lies " + std::to_string(plane) +
                      " elements from key_cache; the GPU kernels take value_cache 0 to 2^31 - 1 "
                      "elements after key_cache (e.g. the halves of one torch.empty(2, num_blocks, "
                      "...) tensor, or one [num_blocks, 2, block_size, Hkv, D] cache)");
  }
  const int64_t shape[] = {k.size(0), 2, k.size(1), k.size(2), k.size(3)};
  const int64_t strides[] = {k.stride(0), plane, k.stride(1), k.stride(2), k.stride(3)};
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
