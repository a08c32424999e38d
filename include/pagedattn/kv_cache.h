// KV-cache geometry: logical shape (num_blocks, 2, block_size, num_kv_heads, head_size), the
// physical stride order of each layout, and an owning allocation that hands out the logical view.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

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

// One layer's paged cache as do_kv_cache_update and forward take it: the K pages and the V pages,
// each logical [num_blocks, block_size, num_kv_heads, head_size], at any two addresses with one set
// of strides (NHD or HND). Made from vLLM's one tensor [num_blocks, 2, block_size, num_kv_heads,
// head_size] (its two planes) or from two tensors (vLLM's key_cache and value_cache, FlashInfer's
// (k_cache, v_cache)). Non-owning, like TensorView.
class KVCacheView {
 public:
  KVCacheView() = default;  // no cache (encoder layers that read the new tokens)
  // The one-tensor form; a tensor of another shape is kept as given and refused by check().
  KVCacheView(const TensorView& kv_cache);  // NOLINT(google-explicit-constructor)
  KVCacheView(const TensorView& key_cache, const TensorView& value_cache);

  bool defined() const { return key_.defined() || value_.defined() || whole_.defined(); }
  // OK when K and V are rank-4 views of one shape, dtype, device and stride set with unit stride
  // along head_size; else an error naming what was given.
  Status check() const;
  const TensorView& key() const { return key_; }
  const TensorView& value() const { return value_; }
  // Shape and storage (after check()): both planes share them.
  int64_t num_blocks() const { return key_.size(0); }
  int64_t block_size() const { return key_.size(1); }
  int64_t num_kv_heads() const { return key_.size(2); }
  int64_t head_size() const { return key_.size(3); }
  DType dtype() const { return key_.dtype(); }
  const Device& device() const { return key_.device(); }
  // What was given, for messages: "kv_cache bf16[...] cuda:0" or "key_cache ..., value_cache ...".
  std::string describe() const;

 private:
  TensorView key_;
  TensorView value_;
  TensorView whole_;  // the one tensor it was made from (undefined for two)
};

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
