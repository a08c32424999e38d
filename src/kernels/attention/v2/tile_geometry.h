// Tile geometry of the v2 paged attention kernel: how many query rows, keys and output columns one
// CTA covers, for each head size. Host-usable constexpr: the kernel's tile configurations
// (traits.cuh) and the split-KV planner's CTA count (plan/split_kv.cc) both read it, so the planner
// counts the CTAs the kernel launches.
//
// A packed row is a (token, query head of one KV group) pair. Requests of at most
// kDecodeTileRows packed rows run in the decode-shaped tile (one m16 row tile, the 4 warps split
// the keys); the others in prefill-shaped tiles (the 4 warps split the rows). Head sizes above
// kMaxCtaColumns split the output columns over several CTAs (head size 512: two).
#pragma once

#include <cstdint>

namespace pagedattn::kernels::attention::v2 {

inline constexpr int kMmaRows = 16;  // rows of one mma.m16n8k16 tile
inline constexpr int kWarps = 4;
inline constexpr int kMaxCtaColumns = 256;

constexpr int cta_columns(int head_size) {
  return head_size > kMaxCtaColumns ? kMaxCtaColumns : head_size;
}
constexpr int column_chunks(int head_size) {
  return head_size > kMaxCtaColumns ? head_size / kMaxCtaColumns : 1;
}

struct TileShape {
  int m_tiles;  // m16 row tiles per warp
  int warps_m;  // warps along rows (kWarps / warps_n)
  int warps_n;  // warps along the keys of a KV tile
  int keys;     // keys per KV tile
  int stages;   // cp.async pipeline depth
  constexpr int rows() const { return kMmaRows * m_tiles * warps_m; }
};

// FP8 stages are half the bytes: the decode-shaped tile keeps one more in flight.
constexpr TileShape decode_tile(int head_size, bool fp8) {
  return {1, 1, kWarps, 64, head_size <= 128 ? (fp8 ? 4 : 3) : 2};
}
constexpr TileShape prefill_tile(int head_size) {
  return {head_size <= 128 ? 2 : 1, kWarps, 1, head_size <= 192 ? 64 : 32, 2};
}

inline constexpr int kDecodeTileRows = decode_tile(128, false).rows();

// Row tiles the kernel gives `rows` packed rows of one request (per KV head and column chunk).
constexpr int64_t row_tiles(int64_t rows, int head_size) {
  if (rows <= 0) return 0;
  if (rows <= kDecodeTileRows) return 1;
  const int64_t tile = prefill_tile(head_size).rows();
  return (rows + tile - 1) / tile;
}

// CTAs of one request split: row tiles x column chunks x KV heads.
constexpr int64_t request_ctas(int64_t rows, int head_size, int num_kv_heads) {
  return row_tiles(rows, head_size) * column_chunks(head_size) * num_kv_heads;
}

}  // namespace pagedattn::kernels::attention::v2
