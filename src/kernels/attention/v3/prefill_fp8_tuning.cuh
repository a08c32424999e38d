// The variants of the v3 FP8 prefill kernel: kFp8Tune* bits, template parameters of the kernel
// (prefill_fp8_kernel.cuh), so each built variant is its own kernel and the dispatch's pays no
// branch for the others. PrefillFp8Args::tuning picks one of kFp8BuiltTunings at launch
// (set_fp8_tuning, for benches comparing them in one run). Variants measured and gone (the
// exponentials on the FMA pipe, no ping-pong turns, 160- and 224-key tiles at D 128, every form of
// the producer's in-kernel V transpose, which the pre-pass of prefill_fp8_vt.h replaced, wgmmas
// issued a k32 step at a time, and the row sums folded into P·V) are in docs/kernels.md.
#pragma once

namespace pagedattn::kernels::attention::v3 {

// The exact softmax's options: O's rescale skipped by warps where no row maximum grew (alpha = 1
// exactly), S_i issued before waiting for Vᵀ_{i-1}, P·V after.
inline constexpr int kFp8TuneSkipRescale = 4;
inline constexpr int kFp8TuneEarlyScores = 8;
// The lazy softmax (prefill_fp8_softmax.cuh: a row's base moves only when its maximum passes it by
// 2.75 log2 units; early S and the skip implied), and with tree reductions for maxima and sums.
inline constexpr int kFp8TuneLazyRescale = 32;
inline constexpr int kFp8TuneTreeReduce = 64;
// With the lazy softmax: the row sums of P by the tensor cores (an m64n8k32 wgmma of P times ones
// beside each P·V step, rescaled with O), not 64 adds per thread and tile; the sums are then of
// the e4m3-rounded P that P·V uses.
inline constexpr int kFp8TuneTensorSums = 2048;
// Wider KV tiles than the bf16 kernel's (FlashAttention-3's FP8 sizes are wider too): 192 keys
// at D 128, 128 at D 256, so each tile's fixed costs (row maxima and their shuffles, barriers,
// turns) spread over more keys. They fit because Vᵀ comes copied (no V ring), and a producer
// that only loads and converts Q leaves the consumers 240 registers. At D 256 pages must hold
// whole tiles (multiples of 128 keys): the launch drops the bit for pages of 64.
inline constexpr int kFp8TuneWideTiles = 524288;

// Keys per KV tile: the bf16 kernel's (128 at D 128, 64 at D 256), or the wide ones.
constexpr int fp8_kv_tile_keys(int d, int tuning) {
  if (tuning & kFp8TuneWideTiles) return d == 128 ? 192 : 128;
  return d == 128 ? 128 : 64;
}
// Keys per TMA box of K (and so the page sizes served: multiples of it): whole tiles of a power of
// two, else 64 (a 192-key tile straddles pages of 128; a box of 64 never does).
constexpr int fp8_k_box_keys(int tile_keys) {
  return (tile_keys & (tile_keys - 1)) == 0 ? tile_keys : 64;
}

// The exact softmax (SharpScoresMoveTheBases' reference).
inline constexpr int kFp8ExactTuning = kFp8TuneEarlyScores | kFp8TuneSkipRescale;
// 2144: the lazy softmax with tree reductions and the tensor cores' row sums, 64-key tiles at
// D 256 (the dispatch's for pages of 64 keys).
inline constexpr int kFp8NarrowTuning =
    kFp8TuneLazyRescale | kFp8TuneTreeReduce | kFp8TuneTensorSums;
// 526432, the dispatch's: 2144 with the wide tiles (192 keys at D 128, 128 at D 256). H200
// (V3Fp8Bench 1 x 8192, TFLOP/s, non-causal / causal, two rounds in one run; docs/kernels.md):
// D 128 822-889 / 755-790 against 721-759 / 727-789 for 2144; D 256 1100-1107 / 1009-1080
// against 954-959 / 880-968 with 64-key tiles and 787-894 / 752-839 for the previous dispatch's
// in-kernel transpose (171616).
inline constexpr int kFp8DefaultTuning = kFp8NarrowTuning | kFp8TuneWideTiles;

inline constexpr int kFp8BuiltTunings[] = {
    kFp8DefaultTuning,
    kFp8NarrowTuning,
    kFp8ExactTuning,
};
constexpr bool fp8_tuning_built(int tuning) {
  for (int built : kFp8BuiltTunings) {
    if (built == tuning) return true;
  }
  return false;
}
static_assert(fp8_tuning_built(kFp8DefaultTuning), "the dispatch's variant must be built");

}  // namespace pagedattn::kernels::attention::v3
