// The v3 FP8 prefill kernel's configurations, compile-time parameters of the kernel
// (v3/fp8/kernel.cuh) that differ in keys per KV tile, and so in the consumers' schedule
// (v3/fp8/mainloop_mma.cuh). All run the lazy softmax with tree reductions and the row sums on the
// tensor cores (v3/fp8/softmax.cuh); the variants tried and dropped are in docs/performance.md.
#pragma once

namespace pagedattn::kernels::attention::v3 {

// At D 128 one configuration: the bf16 kernel's 128-key tiles, S_{i+1} issued beside P_i·V_i (the
// part that P_i·V_i adds to O fits beside S, O and P in 232 registers with tiles of 128 keys, not
// of 192). At D 256 two, each KV tile in turn (O alone holds 128 registers): kWide, the default,
// 128 keys, twice the bf16 kernel's, so each tile's fixed costs spread over more keys (they fit
// because Vᵀ comes copied and a producer that only loads and converts Q leaves the consumers 240
// registers); kNarrow, the bf16 kernel's 64 keys, for pages of 64 keys (the launch picks it there).
// K comes in one TMA box per tile, so pages hold whole tiles.
enum class Fp8Tiles { kWide, kNarrow };

// Keys per KV tile.
constexpr int fp8_kv_tile_keys(int d, Fp8Tiles tiles) {
  return d == 128 || tiles == Fp8Tiles::kWide ? 128 : 64;
}

}  // namespace pagedattn::kernels::attention::v3
