#include "testing/host_cache_write.h"

#include "common/numeric.h"

namespace pagedattn::testing {

void write_tokens_on_host(const TensorView& key, const TensorView& value,
                          std::span<const int64_t> slots, const KVScales& scales,
                          const TensorView& cache) {
  const int64_t block_size = cache.size(2), hkv = cache.size(3), dim = cache.size(4);
  const bool fp8 = is_fp8(cache.dtype());
  for (int plane = 0; plane < 2; ++plane) {
    const TensorView& src = plane == 0 ? key : value;
    const TensorView& scale = plane == 0 ? scales.k_scale : scales.v_scale;
    for (size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] < 0) continue;
      const int64_t base = (slots[t] / block_size) * cache.stride(0) + plane * cache.stride(1) +
                           (slots[t] % block_size) * cache.stride(2);
      for (int64_t h = 0; h < hkv; ++h) {
        const float s = fp8 ? scale.data_as<const float>()[scale.numel() == 1 ? 0 : h] : 1.0f;
        for (int64_t e = 0; e < dim; ++e) {
          const float x = load_as_float(src.data(), src.dtype(), (int64_t(t) * hkv + h) * dim + e);
          store_from_float(cache.data(), cache.dtype(),
                           base + h * cache.stride(3) + e * cache.stride(4), x / s);
        }
      }
    }
  }
}

}  // namespace pagedattn::testing
