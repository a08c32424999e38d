// CPU_ATTN's do_kv_cache_update (vLLM's reshape_and_cache_flash): new K/V rows into the paged
// cache at slot_mapping, in either layout, copied bit for bit or encoded to FP8.
#include <cstdint>
#include <cstring>
#include <string>

#include "backends/cache_checks.h"
#include "backends/cpu/cpu_impl.h"
#include "common/numeric.h"

namespace pagedattn::cpu {
namespace {

Status check_new_tokens(const TensorView& t, std::string_view what, const AttentionImplParams& p,
                        int64_t num_tokens) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {p.dtype}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(t, what, Device::cpu()));
  if (t.size(0) < num_tokens || t.size(1) != p.num_kv_heads || t.size(2) != p.head_size) {
    return invalid_argument(std::string(what) + " is " + t.describe() +
                            "; expected [>= " + std::to_string(num_tokens) + ", " +
                            std::to_string(p.num_kv_heads) + ", " + std::to_string(p.head_size) +
                            "] (num_tokens = slot_mapping's length)");
  }
  return ok_status();
}

}  // namespace

Status write_kv_cache(const AttentionImplParams& p, const TensorView& key, const TensorView& value,
                      const KVCacheView& kv_cache, const TensorView& slot_mapping,
                      const KVScales& scales) {
  if (!slot_mapping.defined()) return invalid_argument("slot_mapping is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(slot_mapping, "slot_mapping", 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(slot_mapping, "slot_mapping", {DType::kI64}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(slot_mapping, "slot_mapping", Device::cpu()));
  const int64_t num_tokens = slot_mapping.size(0);
  PAGEDATTN_RETURN_IF_ERROR(check_new_tokens(key, "key", p, num_tokens));
  PAGEDATTN_RETURN_IF_ERROR(check_new_tokens(value, "value", p, num_tokens));

  const DType storage = cache_storage_dtype(p);
  const bool fp8 = is_fp8(p.kv_cache_dtype);
  PAGEDATTN_RETURN_IF_ERROR(
      backends::check_kv_cache(kv_cache, {storage, fp8 ? DType::kU8 : storage}, Device::cpu(),
                               p.num_kv_heads, p.head_size, p.kv_layout));
  const int64_t num_blocks = kv_cache.num_blocks();
  const int64_t block_size = kv_cache.block_size();
  if (fp8) PAGEDATTN_RETURN_IF_ERROR(check_scales(scales, p.num_kv_heads));

  const int64_t* slots = slot_mapping.data_as<const int64_t>();
  const int64_t num_slots = num_blocks * block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slots[t * slot_mapping.stride(0)];
    if (slot != -1 && (slot < 0 || slot >= num_slots)) {
      return invalid_argument("slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                              " is outside the cache (allowed: -1 or [0, " +
                              std::to_string(num_slots) + "))");
    }
  }

  const DType encode_to = storage;  // u8 storage of an FP8 cache still holds `storage` codes
  const size_t element_bytes = dtype_size(p.dtype);
  const bool copy_bits = !fp8 && storage == p.dtype;
  const int heads = p.num_kv_heads;
  const int dim = p.head_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slots[t * slot_mapping.stride(0)];
    if (slot < 0) continue;  // padding
    const int64_t block = slot / block_size;
    const int64_t offset = slot % block_size;
    for (int plane = 0; plane < 2; ++plane) {
      const TensorView& src = plane == 0 ? key : value;
      const TensorView& dst = plane == 0 ? kv_cache.key() : kv_cache.value();
      const TensorView& scale = plane == 0 ? scales.k_scale : scales.v_scale;
      for (int h = 0; h < heads; ++h) {
        const int64_t dst_row = block * dst.stride(0) + offset * dst.stride(1) + h * dst.stride(2);
        const int64_t src_row = t * src.stride(0) + h * src.stride(1);
        float scale_value = 1.0f;
        if (fp8 && scale.defined()) {
          scale_value = scale.data_as<const float>()[scale.size(0) == 1 ? 0 : h * scale.stride(0)];
        }
        for (int d = 0; d < dim; ++d) {
          const int64_t src_index = src_row + d * src.stride(2);
          const int64_t dst_index = dst_row + d;
          if (copy_bits) {
            std::memcpy(static_cast<std::byte*>(dst.data()) + dst_index * element_bytes,
                        static_cast<const std::byte*>(src.data()) + src_index * element_bytes,
                        element_bytes);
          } else {
            // FP8: saturate(x / scale), round to nearest even; other caches: plain rounding.
            const float x = load_as_float(src.data(), p.dtype, src_index);
            store_from_float(dst.data(), encode_to, dst_index, x / scale_value);
          }
        }
      }
    }
  }
  return ok_status();
}

}  // namespace pagedattn::cpu
