// The v3 FP8 prefill kernel's two configurations, compile-time parameters of the kernel
// (v3/fp8/kernel.cuh) that differ only in keys per KV tile. Both run the lazy softmax with tree
// reductions and the row sums on the tensor cores (v3/fp8/softmax.cuh); the variants tried
// and dropped are in docs/performance.md.
#pragma once

namespace pagedattn::kernels::attention::v3 {

// kWide, the default: wider KV tiles than the bf16 kernel's, 192 keys at D 128 and 128 at D 256, so
// each tile's fixed costs (row maxima and their shuffles, barriers, turns) spread over more keys.
// They fit because Vᵀ comes copied (no V ring) and a producer that only loads and converts Q
// leaves the consumers 240 registers. kNarrow: the bf16 kernel's tiles (128 keys at D 128, 64 at
// D 256), for pages of 64 keys at D 256, which cannot hold a wide tile's K boxes (the launch picks
// it there; at D 128 the wide tiles' 64-key boxes fit every page the kernel serves).
enum class Fp8Tiles { kWide, kNarrow };

// Keys per KV tile.
constexpr int fp8_kv_tile_keys(int d, Fp8Tiles tiles) {
  if (tiles == Fp8Tiles::kWide) return d == 128 ? 192 : 128;
  return d == 128 ? 128 : 64;
}
// Keys per TMA box of K (and so the page sizes served: multiples of it): whole tiles of a power of
// two, else 64 (a 192-key tile straddles pages of 128; a box of 64 never does).
constexpr int fp8_k_box_keys(int tile_keys) {
  return (tile_keys & (tile_keys - 1)) == 0 ? tile_keys : 64;
}

}  // namespace pagedattn::kernels::attention::v3
