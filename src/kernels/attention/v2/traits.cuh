// Tile configurations of the v2 paged attention kernel (from tile_geometry.h) and the arguments
// it receives.
//
// A CTA has 4 warps and computes kBlockM packed query rows (a packed row is a (token, head within
// the KV group) pair, so the G query heads of one KV head share every K/V tile) against the keys of
// one request split, for one KV head and one chunk of kDV output columns. Warps form a
// kWarpsM x kWarpsN grid: each owns 16 * kMT rows and kBlockN / kWarpsN keys of every KV tile.
// kWarpsN > 1 (decode-shaped tiles) gives each warp its own softmax state, merged in the epilogue.
#pragma once

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/v2/tile_geometry.h"
#include "kernels/cache_kind.h"

namespace pagedattn::kernels::attention::v2 {

template <int kHeadDim_, int kDV_, int kMT_, int kWarpsM_, int kWarpsN_, int kBlockN_, int kStages_>
struct TileConfig {
  static constexpr int kHeadDim = kHeadDim_;  // instantiated head size (Q/K columns)
  static constexpr int kDV = kDV_;            // output (V) columns per CTA
  static constexpr int kMT = kMT_;            // m16 tiles per warp
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kBlockN = kBlockN_;  // keys per KV tile
  static constexpr int kStages = kStages_;  // cp.async pipeline depth
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBlockM = 16 * kMT * kWarpsM;
  static constexpr int kWarpKeys = kBlockN / kWarpsN;
  // Rows padded by 16 bytes: an odd number of 16-byte chunks per row keeps ldmatrix conflict-free.
  static constexpr int kQRowBytes = kHeadDim * 2 + 16;
  static constexpr int kVRowBytes = kDV * 2 + 16;
  static constexpr int kChunksK = kHeadDim / 8;  // 8-element chunks per K row
  static constexpr int kChunksV = kDV / 8;
  static constexpr int kQBytes = kBlockM * kQRowBytes;
  static constexpr int kKTileBytes = kBlockN * kQRowBytes;
  static constexpr int kVTileBytes = kBlockN * kVRowBytes;
  static constexpr int kStageBytes = kKTileBytes + kVTileBytes;      // 16-bit K + V tile
  static constexpr int kRawStageBytes = kBlockN * (kHeadDim + kDV);  // FP8 K + V tile
  // Block ids of the key rows of the next tiles (see fetch_tile_blocks): the ring holds the
  // kStages - 1 tiles fetched ahead of the copies plus the ones being copied.
  static constexpr int kTableSlots = 2 * kStages - 2;
  static constexpr int kTableBytes = kTableSlots * kBlockN * 4;
  static constexpr int kORowFloats = kDV + 4;
  static constexpr int kEpilogueBytes = kWarpsN * kBlockM * (kORowFloats + 2) * 4;

  static constexpr int stage_bytes(bool fp8) {
    return fp8 ? kStages * kRawStageBytes + kStageBytes : kStages * kStageBytes;
  }
  static constexpr int pipeline_bytes(bool fp8) { return kQBytes + stage_bytes(fp8) + kTableBytes; }
  static constexpr int smem_bytes(bool fp8) {
    return pipeline_bytes(fp8) > kEpilogueBytes ? pipeline_bytes(fp8) : kEpilogueBytes;
  }

  static_assert(kThreads == 32 * kWarps, "the kernels are written for 4 warps");
  static_assert(kWarpKeys % 16 == 0, "each warp needs whole 16-key mma steps");
  static_assert(kBlockN <= kThreads, "one thread fetches each key row's block id");
  static_assert(kHeadDim % 16 == 0 && kDV % 16 == 0, "head size must be a multiple of 16");
};

template <int D, TileShape kShape>
using TileFor = TileConfig<D, cta_columns(D), kShape.m_tiles, kShape.warps_m, kShape.warps_n,
                           kShape.keys, kShape.stages>;

// Decode-shaped tiles (<= kDecodeTileRows packed rows): warps split the KV tile. Prefill-shaped
// tiles: warps split the rows.
template <int D, bool kFp8>
struct SmallTile {
  using Type = TileFor<D, decode_tile(D, kFp8)>;
};
template <int D>
struct LargeTile {
  using Type = TileFor<D, prefill_tile(D)>;
};

// Everything the device needs: the caller's parameters plus values derived once on the host.
struct KernelArgs {
  PagedAttentionParams p;
  int group = 1;         // query heads per KV head
  int dchunks = 1;       // output column chunks per head (head sizes above 256)
  int block_shift = -1;  // log2(block_size) when it is a power of two, else -1
  // Cache strides in elements, as 32-bit values (the launcher checks they fit).
  int block_stride = 0;
  int token_stride = 0;
  int head_stride = 0;
  // The ragged source's strides (PagedAttentionParams::k_new), 32-bit like the cache's.
  int new_token_stride = 0;
  int new_head_stride = 0;
  int64_t new_v_delta = 0;   // bytes from a new token's K row to its V row
  bool write_split = false;  // max_num_splits > 1: write partials, the combine writes out/lse
  // FP8 cache 16-byte aligned with strides and head_size multiples of 16: 16-byte row copies.
  bool fp8_wide_copies = false;
};

}  // namespace pagedattn::kernels::attention::v2
