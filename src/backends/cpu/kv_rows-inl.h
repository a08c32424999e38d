// Where a key's K and V rows sit in the cache, and the prefetcher that brings the next tile's rows
// in while the current one is computed; shared by the prefill and decode kernels.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_KV_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_KV_ROWS_INL_H_
#undef PAGEDATTN_CPU_KV_ROWS_INL_H_
#else
#define PAGEDATTN_CPU_KV_ROWS_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/attention_kernel_internal.h"
#include "pagedattn/types.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

// Element offset of key j's row (KV head 0) in the cache or in the new-token tensor.
inline int64_t key_offset(const KvSource& kv, const RequestPass& rp, int j) {
  if (rp.blocks == nullptr) return (rp.token_base + j) * kv.token_stride;
  return rp.blocks[j / kv.block_size] * kv.block_stride + (j % kv.block_size) * kv.token_stride;
}

// Prefetches the next tile's K and V rows a few cache lines at a time from inside the arithmetic
// loops, so that memory traffic overlaps the current tile's compute (a burst would fill the miss
// buffers and stall just the same).
class TilePrefetcher {
 public:
  // The rows of keys [first, first + count) (count <= kMaxTile) of KV heads [h0, h0 + heads),
  // spread over `calls` calls of issue().
  void plan(const AttentionPass& pass, const RequestPass& rp, int h0, int heads, int first,
            int count, int calls) {
    const KvSource& kv = pass.kv;
    elem_ = static_cast<int64_t>(dtype_size(kv.dtype));
    planes_[0] = static_cast<const char*>(kv.k_base) + h0 * kv.head_stride * elem_;
    planes_[1] = static_cast<const char*>(kv.v_base) + h0 * kv.head_stride * elem_;
    head_bytes_ = kv.head_stride * elem_;
    heads_ = heads;
    // Divisions by the block size here, once per key, not per line issued.
    for (int k = 0; k < count; ++k) rows_[k] = key_offset(kv, rp, first + k) * elem_;
    row_lines_ = static_cast<int>((pass.head_size * elem_ + 63) / 64);
    lines_ = count * heads * 2 * row_lines_;
    per_call_ = (lines_ + calls - 1) / std::max(calls, 1);
    next_ = key_ = plane_ = head_ = line_ = 0;
  }
  HWY_INLINE void issue() {
    for (int n = 0; n < per_call_ && next_ < lines_; ++n, ++next_) {
      if (line_ == 0) row_ = planes_[plane_] + rows_[key_] + head_ * head_bytes_;
      __builtin_prefetch(row_ + 64 * line_, 0, 2);  // into L2: more misses in flight than L1
      if (++line_ < row_lines_) continue;
      // Next row in the cache's order (NHD): heads of a plane, the planes, then the next key.
      line_ = 0;
      if (++head_ < heads_) continue;
      head_ = 0;
      if (++plane_ < 2) continue;
      plane_ = 0;
      ++key_;
    }
  }

 private:
  const char* planes_[2] = {nullptr, nullptr};  // K and V at KV head h0
  int64_t rows_[kMaxTile] = {};                 // byte offset of each key's row
  int64_t head_bytes_ = 0, elem_ = 1;
  int heads_ = 1, row_lines_ = 1, lines_ = 0, per_call_ = 0, next_ = 0;
  int key_ = 0, plane_ = 0, head_ = 0, line_ = 0;
  const char* row_ = nullptr;
};

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
