// Tile scheduler of the v2 paged attention kernel: the grid shape, which (request, split, KV head,
// column chunk, row tile) a CTA serves, and which KV tiles its split covers.
//
// Grid: x = (request slot * max_num_splits + split) * (KV heads * output-column chunks) + KV head
// chunk, y = row tile of the request's packed rows. KV heads vary fastest so that CTAs running
// together read neighbouring bytes of the same cache blocks; the heaviest (last) row tiles start
// first. Every bound comes from upper bounds (max_query_len, max_num_splits, num_reqs), so the
// launch is CUDA-graph safe; CTAs past a request's real work return at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/mask.h"
#include "kernels/attention/v2/traits.cuh"

namespace pagedattn::kernels::attention::v2 {

// Where one CTA works: request, split, KV head, rows and the key range of its split.
struct CtaWork {
  int req;
  int split;
  int kv_head;
  int dchunk;
  int q_start;  // first token of the request
  int q_len;
  int kv_len;  // keys of the request (seqused_k)
  int rows;    // q_len * group packed rows
  int row0;    // first packed row of this CTA
  int ctx;     // position of the first query: kv_len - q_len, or query_pos0's under a key shard
};

// Row tiles of the prefill-shaped launch (0: every request fits the decode-shaped tile).
template <typename Small, typename Large>
unsigned prefill_row_tiles(const KernelArgs& a) {
  const int64_t max_rows = static_cast<int64_t>(a.p.max_query_len) * a.group;
  if (max_rows <= Small::kBlockM) return 0;
  return static_cast<unsigned>((max_rows + Large::kBlockM - 1) / Large::kBlockM);
}

inline dim3 grid_shape(const KernelArgs& a, unsigned row_tiles) {
  const PagedAttentionParams& p = a.p;
  return dim3(
      static_cast<unsigned>(request_slots(p) * p.max_num_splits * p.num_kv_heads * a.dchunks),
      row_tiles);
}

// Decodes this CTA's work; false when it has none (a split past the request's count, an empty
// slot, an empty request, a request of the other tile shape, a row tile past its rows).
template <typename Small, typename Large, bool kLarge>
__device__ __forceinline__ bool schedule_cta(const KernelArgs& a, CtaWork& w, int& num_splits) {
  const PagedAttentionParams& p = a.p;
  const int heads = p.num_kv_heads * a.dchunks;
  const int head_idx = blockIdx.x % heads;
  const int work = blockIdx.x / heads;
  const int slot = work / p.max_num_splits;
  w.req = p.pass_requests != nullptr ? p.pass_requests[slot] : slot;
  if (w.req < 0) return false;
  w.split = work % p.max_num_splits;
  num_splits = p.num_splits_per_req != nullptr
                   ? min(max(p.num_splits_per_req[w.req], 1), p.max_num_splits)
                   : p.max_num_splits;
  if (w.split >= num_splits) return false;
  w.kv_head = head_idx / a.dchunks;
  w.dchunk = head_idx % a.dchunks;
  w.q_start = p.cu_seqlens_q[w.req];
  w.q_len = p.cu_seqlens_q[w.req + 1] - w.q_start;
  w.kv_len = p.seqused_k[w.req];
  w.rows = w.q_len * a.group;
  w.ctx = p.query_pos0 != nullptr ? p.query_pos0[w.req] : w.kv_len - w.q_len;
  if (w.q_len <= 0 || (w.rows > Small::kBlockM) != kLarge) return false;
  if constexpr (kLarge) {
    w.row0 = (gridDim.y - 1 - blockIdx.y) * Large::kBlockM;
    return w.row0 < w.rows;
  } else {
    w.row0 = 0;
    return true;
  }
}

// The KV tiles of one CTA's split and the keys every one of its rows sees.
struct SplitTiles {
  int begin;  // [begin, end): this split's tiles
  int end;
  int all_lo;  // [all_lo, all_hi]: keys visible to every row; tiles inside need no mask
  int all_hi;
};

// This split's share of the tiles the CTA's rows can see (their union is [lo of the first row,
// hi of the last]): splitting the visible range, not the whole sequence, keeps every split of a
// windowed request busy.
template <typename Cfg>
__device__ __forceinline__ SplitTiles split_tiles(const KernelArgs& a, const CtaWork& w,
                                                  int num_splits) {
  const int last_row = min(w.rows, w.row0 + Cfg::kBlockM) - 1;
  const mask::KeyRange<int> first = mask::visible_keys(a.p, w.kv_len, w.ctx + w.row0 / a.group);
  const mask::KeyRange<int> last = mask::visible_keys(a.p, w.kv_len, w.ctx + last_row / a.group);
  const int n_tiles = (w.kv_len + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int vis_begin = first.lo / Cfg::kBlockN;
  const int vis_end = last.hi < first.lo ? vis_begin : min(n_tiles, last.hi / Cfg::kBlockN + 1);
  const int per_split = (vis_end - vis_begin + num_splits - 1) / num_splits;
  SplitTiles t;
  t.begin = min(vis_end, vis_begin + w.split * per_split);
  t.end = min(vis_end, t.begin + per_split);
  t.all_lo = last.lo;
  t.all_hi = first.hi;
  return t;
}

}  // namespace pagedattn::kernels::attention::v2
