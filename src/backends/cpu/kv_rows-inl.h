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
// buffers and stall just the same). The lines go in the cache's order as runs of contiguous
// lines: a key's rows of all the task's heads where they are adjacent (NHD), else one row.
class TilePrefetcher {
 public:
  // The rows of keys [first, first + count) (count <= kMaxTile) of KV heads [h0, h0 + heads),
  // spread over `calls` calls of issue().
  void plan(const AttentionPass& pass, const RequestPass& rp, int h0, int heads, int first,
            int count, int calls) {
    const KvSource& kv = pass.kv;
    const int64_t elem = static_cast<int64_t>(dtype_size(kv.dtype));
    planes_[0] = static_cast<const char*>(kv.k_base) + h0 * kv.head_stride * elem;
    planes_[1] = static_cast<const char*>(kv.v_base) + h0 * kv.head_stride * elem;
    head_bytes_ = kv.head_stride * elem;
    // Divisions by the block size here, once per key, not per line issued.
    for (int k = 0; k < count; ++k) rows_[k] = key_offset(kv, rp, first + k) * elem;
    const bool adjacent = kv.head_stride == pass.head_size;
    const int64_t run_bytes = (adjacent ? heads : 1) * pass.head_size * elem;
    run_lines_ = static_cast<int>((run_bytes + 63) / 64);
    runs_per_plane_ = adjacent ? 1 : heads;
    const int lines = count * 2 * runs_per_plane_ * run_lines_;
    per_call_ = (lines + calls - 1) / std::max(calls, 1);
    runs_left_ = count * 2 * runs_per_plane_;
    key_ = plane_ = head_ = 0;
    left_ = 0;
    if (runs_left_ > 0) start_run();
  }
  HWY_INLINE void issue() {
    for (int n = per_call_; n > 0 && left_ > 0;) {
      const int take = std::min(n, left_);
      for (int i = 0; i < take; ++i) {
        __builtin_prefetch(line_ + 64 * i, 0, 2);  // into L2: more misses in flight than L1
      }
      line_ += 64 * take;
      left_ -= take;
      n -= take;
      if (left_ == 0) next_run();
    }
  }

 private:
  void start_run() {
    line_ = planes_[plane_] + rows_[key_] + head_ * head_bytes_;
    left_ = run_lines_;
  }
  // The next run in the cache's order (NHD): heads of a plane, the planes, then the next key.
  void next_run() {
    if (--runs_left_ == 0) return;
    if (++head_ == runs_per_plane_) {
      head_ = 0;
      if (++plane_ == 2) plane_ = 0, ++key_;
    }
    start_run();
  }

  const char* planes_[2] = {nullptr, nullptr};  // K and V at KV head h0
  int64_t rows_[kMaxTile] = {};                 // byte offset of each key's row
  int64_t head_bytes_ = 0;
  int run_lines_ = 1, runs_per_plane_ = 1, per_call_ = 0, runs_left_ = 0, left_ = 0;
  int key_ = 0, plane_ = 0, head_ = 0;
  const char* line_ = nullptr;  // the next line to prefetch
};

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
