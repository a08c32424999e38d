// KV-cache geometry: logical shape (num_blocks, 2, block_size, num_kv_heads, head_size), the
// physical stride order of each layout, and an owning allocation that hands out the logical view.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn {

// "Any block size divisible by base" (vLLM's MultipleOf).
struct MultipleOf {
  int base = 1;
  bool accepts(int block_size) const { return block_size > 0 && block_size % base == 0; }
};

using KVCacheShape = std::array<int64_t, 5>;
using KVCacheStrideOrder = std::array<int, 5>;

// (num_blocks, 2, block_size, num_kv_heads, head_size); every argument must be positive and the
// element count must fit int64 (out of range otherwise).
StatusOr<KVCacheShape> get_kv_cache_shape(int64_t num_blocks, int block_size, int num_kv_heads,
                                          int head_size,
                                          KVCacheDType cache_dtype = KVCacheDType::kAuto);
// NHD (0,1,2,3,4); HND (0,1,3,2,4): physical dim i is logical dim order[i].
KVCacheStrideOrder get_kv_cache_stride_order(KVCacheLayout layout);
// Logical-order strides (elements) for a buffer laid out physically in `layout`.
std::array<int64_t, 5> kv_cache_strides(const KVCacheShape& shape, KVCacheLayout layout);
// Bytes of one block (K and V planes together); an error for a non-positive size or an int64
// overflow.
StatusOr<int64_t> kv_cache_bytes_per_block(int block_size, int num_kv_heads, int head_size,
                                           DType storage);

// The process-wide default layout (vLLM's get/set_kv_cache_layout); NHD unless set.
KVCacheLayout get_kv_cache_layout();
void set_kv_cache_layout(KVCacheLayout layout);

// Owns the memory of one layer's cache (host or CUDA device) and views it with the logical shape
// and the layout's physical strides. allocate refuses a shape whose byte count overflows int64 and
// reports a failed allocation with the byte count it asked for; the contents are uninitialised.
class KVCacheAllocation {
 public:
  static StatusOr<KVCacheAllocation> allocate(const KVCacheShape& shape, DType storage,
                                              KVCacheLayout layout, Device device);
  KVCacheAllocation() = default;  // empty
  KVCacheAllocation(KVCacheAllocation&&) noexcept;
  KVCacheAllocation& operator=(KVCacheAllocation&&) noexcept;
  ~KVCacheAllocation();

  const TensorView& view() const { return view_; }
  KVCacheLayout layout() const { return layout_; }
  int64_t nbytes() const { return view_.nbytes(); }

 private:
  void release();
  TensorView view_;
  KVCacheLayout layout_ = KVCacheLayout::kNHD;
  void* memory_ = nullptr;
};

}  // namespace pagedattn
