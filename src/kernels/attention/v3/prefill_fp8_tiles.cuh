// The v3 FP8 prefill kernel's walk over its work tiles: the bf16 kernel's (prefill_tiles.cuh),
// with the KV tiles of each counted in the FP8 kernel's KV tile size.
#pragma once

#include "kernels/attention/mask.h"
#include "kernels/attention/v3/prefill_shape.cuh"
#include "kernels/attention/v3/prefill_tiles.cuh"

namespace pagedattn::kernels::attention::v3 {

// TileWalk::find with the KV tiles counted in kN-key tiles (the walk counts the bf16 kernel's).
// The FP8 kernel has no sliding window and no split-KV, so a tile's keys start at 0.
template <int kD, int kN>
__device__ __forceinline__ bool find_fp8_tile(TileWalk& walk, const PrefillArgs& a,
                                              PrefillTile& w) {
  if (!walk.find<kD>(a, w)) return false;
  if constexpr (kN != PrefillShape<kD>::kBlockN) {
    const int last_row = min(w.q0 + PrefillShape<kD>::kBlockM, w.q_len) - 1;
    w.num_kv_tiles = visible_keys(a.mask, w.k_len, last_row + w.k_len - w.q_len).hi / kN + 1;
  }
  return true;
}

}  // namespace pagedattn::kernels::attention::v3
