// The work tiles of the v3 prefill kernel and the order a CTA takes them in (v3/traits.cuh,
// PrefillArgs): tile t is split t % max_splits (split-KV; else every tile is split 0) and, with
// u = t / max_splits, query head u % num_heads of request slot (u / num_heads) % num_reqs, query tile
// num_q_tiles - 1 - u / (num_heads * num_reqs). Under a causal mask later query tiles see more
// keys, so the longest tiles of every request come first and the short ones fill the end; the
// query heads of one KV head are neighbours, so CTAs running together share K/V in L2. Every
// thread of a CTA walks the same sequence, so the roles agree on it without communicating.
#pragma once

#include <cstdint>

#include "common/mask.h"
#include "kernels/attention/v3/traits.cuh"

namespace pagedattn::kernels::attention::v3 {

// One work tile: one request, one query head, kBlockM query rows, one split of its KV tiles
// (packed: the KV head's query heads over packed_positions positions).
struct PrefillTile {
  int req;
  int head;   // packed: the KV head's first query head
  int split;  // 0 without split-KV
  int kv_head;
  int q_start;  // the request's first token in the packed batch
  int q_len;
  int k_len;
  int q0;            // first query row (packed: position) of the tile, within the request
  int kv_tile0;      // the first KV tile any of its rows can see (a sliding window's left side)
  int num_kv_tiles;  // KV tiles from kv_tile0 on that any of its rows can see
};

enum class TileKind {
  kNone,        // no rows, or a split past the request's count: nothing computed or written
  kEmptySplit,  // rows, but this split has none of their KV tiles: its partials' LSE is -inf
  kWork,
};

// Fills w for tile t: split t % max_splits (the splits of a query tile are neighbours: they share
// its Q), then query head (packed: KV head), request and query tile as above from t / max_splits.
// KV tiles of kN keys (the FP8 kernel's may be wider than the bf16 kernel's).
template <int kD, bool kPacked = false, int kN = PrefillTraits<kD>::kBlockN>
__device__ __forceinline__ TileKind describe_tile(const PrefillArgs& a, int t, PrefillTile& w) {
  using S = PrefillTraits<kD>;
  w.split = 0;
  if (a.max_splits > 1) {  // no division on the unsplit path
    w.split = t % a.max_splits;
    t /= a.max_splits;
  }
  int rest, positions;
  if constexpr (kPacked) {
    w.kv_head = t % a.num_kv_heads;
    w.head = w.kv_head * a.group;
    rest = t / a.num_kv_heads;
    positions = a.packed_positions;
  } else {
    w.head = t % a.num_heads;
    rest = t / a.num_heads;
    w.kv_head = w.head / a.group;
    positions = S::kBlockM;
  }
  const int slot = rest % a.num_reqs;
  const int listed = a.pass_requests != nullptr ? a.pass_requests[slot] : slot;
  w.req = max(listed, 0);  // an empty slot (-1) reads request 0's start and serves no rows
  w.q_start = a.cu_seqlens_q[w.req];
  w.q_len = listed < 0 ? 0 : a.cu_seqlens_q[w.req + 1] - w.q_start;
  w.q0 = (a.num_q_tiles - 1 - rest / a.num_reqs) * positions;
  if (w.q0 >= w.q_len) return TileKind::kNone;
  w.k_len = a.seqused_k[w.req];
  // Both ends of a row's visible keys grow with its position (the queries are the last q_len
  // positions): the tile sees keys from its first row's lowest to its last row's highest. Every
  // row sees its own position, so the range is never empty; KV tiles outside it are never loaded.
  const int last_row = min(w.q0 + positions, w.q_len) - 1, ctx = w.k_len - w.q_len;
  const int lo = mask::visible_keys(a.mask, w.k_len, w.q0 + ctx).lo;
  const int hi = mask::visible_keys(a.mask, w.k_len, last_row + ctx).hi;
  w.kv_tile0 = lo / kN;
  w.num_kv_tiles = (hi + kN) / kN - w.kv_tile0;
  if (a.max_splits > 1) {
    // Split s of n takes the s-th run of ceil(tiles / n) of the visible tiles (v2's rule).
    const int n = a.splits_per_req != nullptr ? min(max(a.splits_per_req[w.req], 1), a.max_splits)
                                              : a.max_splits;
    if (w.split >= n) return TileKind::kNone;
    const int per = (w.num_kv_tiles + n - 1) / n;
    const int begin = min(w.num_kv_tiles, w.split * per);
    w.kv_tile0 += begin;
    w.num_kv_tiles = min(w.num_kv_tiles - begin, per);
  }
  return w.num_kv_tiles > 0 ? TileKind::kWork : TileKind::kEmptySplit;
}

// What a role does with a tile of no work but rows (an empty split): the producer nothing.
struct IgnoreEmptySplits {
  __device__ __forceinline__ void operator()(const PrefillTile&) const {}
};

// This CTA's tiles with work, in order. Round r hands tiles [r * gridDim.x, (r + 1) * gridDim.x)
// out one per CTA, in CTA order on even rounds and reversed on odd ones: tiles shrink along the
// order under a causal mask, so a fixed order would give CTA 0 the longest tile of every round,
// and the snake pairs each long tile with a short one. (A grid of one CTA per tile has one round.)
struct TileWalk {
  int total;  // num_heads (packed: num_kv_heads) * num_reqs * num_q_tiles * max_splits
  int round = 0;

  __device__ __forceinline__ int tile() const {
    const int ctas = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
    return round * ctas + ((round & 1) ? ctas - 1 - b : b);
  }
  // Moves to the next tile with work, this round's included; false when none is left. Empty
  // splits on the way go to on_empty.
  template <int kD, bool kPacked = false, typename OnEmpty = IgnoreEmptySplits,
            int kN = PrefillTraits<kD>::kBlockN>
  __device__ __forceinline__ bool find(const PrefillArgs& a, PrefillTile& w,
                                       OnEmpty on_empty = {}) {
    for (; round * static_cast<int>(gridDim.x) < total; ++round) {
      const int t = tile();
      if (t >= total) continue;
      const TileKind kind = describe_tile<kD, kPacked, kN>(a, t, w);
      if (kind == TileKind::kWork) return true;
      if (kind == TileKind::kEmptySplit) on_empty(w);
    }
    return false;
  }
  // find, with the KV tiles counted in kN keys (the FP8 kernel's may be wider than the bf16
  // kernel's).
  template <int kD, int kN>
  __device__ __forceinline__ bool find_keys(const PrefillArgs& a, PrefillTile& w) {
    return find<kD, false, IgnoreEmptySplits, kN>(a, w);
  }
  __device__ __forceinline__ void advance() { ++round; }
};

}  // namespace pagedattn::kernels::attention::v3
