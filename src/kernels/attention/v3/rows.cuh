// Which query rows a v3 prefill consumer thread holds: rows g and g + 8 of its warp's 16 (the
// wgmma accumulator layout, wgmma.cuh), as (position within the request, query head) pairs. An
// unpacked work tile is one head's consecutive positions; a GQA-packed one (PrefillArgs::
// packed_positions) interleaves the KV head's query heads, tile row r being position q0 + r / group
// of head w.head + r % group, so a thread's two rows differ in head and position.
#pragma once

#include "kernels/attention/v3/traits.cuh"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

struct ThreadRows {
  int pos[2];   // within the request; at or past q_len: computed, never stored
  int head[2];  // query head
};

// Unpacked: row g is position `row` of the tile's head.
__device__ __forceinline__ ThreadRows unpacked_rows(const PrefillTile& w, int row) {
  return {{row, row + 8}, {w.head, w.head}};
}

// Position within the request of packed tile row r (0 .. kBlockM - 1); rows past the tile's
// packed_positions * group (kBlockM is no multiple of the group: no Q was loaded for them) get
// q_len, a position of none (and small enough for the masks' arithmetic).
__device__ __forceinline__ int packed_position(const PrefillArgs& a, const PrefillTile& w, int r) {
  const int p = r / a.group;
  return p < a.packed_positions ? w.q0 + p : w.q_len;
}

// Packed: tile_row is this thread's row g within the tile.
__device__ __forceinline__ ThreadRows packed_rows(const PrefillArgs& a, const PrefillTile& w,
                                                  int tile_row) {
  ThreadRows t;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tile_row + 8 * h;
    t.pos[h] = packed_position(a, w, r);
    t.head[h] = w.head + r % a.group;
  }
  return t;
}

}  // namespace pagedattn::kernels::attention::v3
