// The variants of the v3 FP8 prefill kernel: kFp8Tune* bits, template parameters of the kernel
// (prefill_fp8_kernel.cuh), so each built variant is its own kernel and the dispatch's pays no
// branch for the others. PrefillFp8Args::tuning picks one of kFp8BuiltTunings at launch
// (set_fp8_tuning, for benches comparing them in one run).
#pragma once

namespace pagedattn::kernels::attention::v3 {

// The exact softmax's options: O's rescale skipped by warps where no row maximum grew (alpha = 1
// exactly), S_i issued before waiting for Vᵀ_{i-1} (the producer's transpose), P·V after. (Bit 1,
// a quarter of the exponentials on the FMA pipe, and bit 16, no ping-pong
// turns, lost on 3680 and on 40544 and are gone: docs/kernels.md.)
inline constexpr int kFp8TuneSkipRescale = 4;
inline constexpr int kFp8TuneEarlyScores = 8;
// The lazy softmax (prefill_fp8_softmax.cuh: a row's base moves only when its maximum passes it by
// 2.75 log2 units; early S and the skip implied), and with tree reductions for maxima and sums.
inline constexpr int kFp8TuneLazyRescale = 32;
inline constexpr int kFp8TuneTreeReduce = 64;
// The producer transposes V two items behind its loads (with three stages: D 128), not one.
inline constexpr int kFp8TuneDeepTranspose = 512;
// V transposed by ldmatrix.trans (transpose_v_tile_ldsm), not 32-bit loads and 4 x 4 byte permutes.
inline constexpr int kFp8TuneLdsmTranspose = 1024;
// With the lazy softmax: the row sums of P by the tensor cores (an m64n8k32 wgmma of P times ones
// beside each P·V step, rescaled with O), not 64 adds per thread and tile; the sums are then of
// the e4m3-rounded P that P·V uses.
inline constexpr int kFp8TuneTensorSums = 2048;
// The producer's roles split (prefill_fp8_producer.cuh, produce_fp8_split): warp 0 only issues
// the TMA copies (Q stages, K/V tiles), as far ahead as the rings allow, and warps 1-3 convert Q
// and transpose V (with the ldmatrix transpose; the lag of kFp8TuneDeepTranspose does not apply).
// With one producer sequence, the copies of KV tile u + 1 waited behind the transpose of tile
// u - lag and the landing of its V, so at D 256 (two stages, lag 1) the loads ran one TMA latency
// plus one transpose per item; split, the K copies wait only for the consumers to free a stage.
inline constexpr int kFp8TuneLoaderWarp = 4096;
// Keys per KV tile: the bf16 kernel's work tiles, KV tiles of 128 keys at D 128 (160- and 192-key
// tiles, bits 16384 and 65536, lost 4-17 % in calls B to D and are gone: docs/kernels.md) and of
// 64 at D 256, or 128 with kFp8TuneWideTiles.
// With kFp8TuneCopiedVt, kFp8TuneWideTiles gives D 256 KV tiles of 128 keys (a whole Vᵀ image,
// half the tiles' fixed costs per key): no V ring in shared memory leaves room for two stages of
// them, and a producer without transposes needs few registers, so the consumers take 232.
inline constexpr int kFp8TuneWideTiles = 524288;
constexpr int fp8_kv_tile_keys(int d, int tuning) {
  return d == 128 || (tuning & kFp8TuneWideTiles) ? 128 : 64;
}
// The ldmatrix transpose stores each unit by one stmatrix.x4, not four 32-bit stores (and their
// four swizzled addresses): about a third fewer producer instructions per V tile.
inline constexpr int kFp8TuneStmatrix = 32768;
// With kFp8TuneStmatrix: each transpose unit's two addresses as a lane constant plus a term of
// the unit's key group and one of its column pair (a swizzled row's chunk order depends on the
// row mod 8 alone, which is the lane's), in place of two full swizzle computations per unit.
// (Bit 8192, two units' ldmatrix in flight, lost 10-20 % in calls A and C and is gone.)
inline constexpr int kFp8TuneHoistedAddresses = 131072;
// With kFp8TuneLoaderWarp: Vᵀ transposed once per launch by a pre-pass into the workspace
// (prefill_fp8_vt.h), and each KV tile's copied by warp 0 with one bulk copy into the Vᵀ ring
// beside K's TMA copy; warps 1-3 only convert Q. In the kernel, every CTA reading a KV tile
// transposed it again (one per query tile and query head).
inline constexpr int kFp8TuneCopiedVt = 262144;
// Warps that transpose V and convert Q (arrivals on v_empty, vt_full, q_full, q_stage_empty).
constexpr int fp8_transpose_warps(int tuning) {
  return (tuning & kFp8TuneLoaderWarp) ? 3 : 4;
}
// The previous dispatch's variant: the exact softmax, early S, the rescale skip.
inline constexpr int kFp8ExactTuning = kFp8TuneEarlyScores | kFp8TuneSkipRescale;
inline constexpr int kFp8LazyTree = kFp8TuneLazyRescale | kFp8TuneTreeReduce;
// H200, V3Fp8Bench (1 x 8192 tokens, TFLOP/s, call C, two rounds; main's library in the same
// run): every piece together 723-727 / 689-691 at D 128 (non-causal / causal) and 713-719 / 694
// at D 256, against main's 612-630 / 574-609 and 533-573 / 534-557. Over kFp8ExactTuning: the
// ldmatrix transpose +6-19 % (most at D 256); the lazy softmax, tree reductions or the deep
// transpose alone -3 to +5 %, together +1-3 % over ldmatrix alone; the tensor-core sums +1-7 %
// more. No turns -3 to -8 %, a quarter of the exponentials on the FMA pipe -3 to -9 % (the MUFU is
// not the bound). A timing-only build without the V transpose (wrong output, not kept) read 811-820
// at D 128 and 982-987 at D 256: the producer's transpose bounds the kernel now, most at D 256.
// 3680, the fourth session's dispatch variant: what the newer bits add to.
inline constexpr int kFp8BaseTuning =
    kFp8LazyTree | kFp8TuneTensorSums | kFp8TuneDeepTranspose | kFp8TuneLdsmTranspose;
// 40544: 3680 with the split producer and the stmatrix stores. Call B (fifth session, TFLOP/s,
// two rounds, 3680 in the same run): D 128 782-788 / 723-730 (non-causal / causal) against
// 698-728 / 661-697, D 256 831-837 / 789-794 against 717-745 / 684-720. Either alone: stmatrix
// 753-758 / 718-723 and 783-784 / 752-755; the split 681 / 634-640 and 727-738 / 683 (the split's
// three transposing warps were short of issue slots until the stores took a quarter of them).
inline constexpr int kFp8SplitStmatrixTuning =
    kFp8BaseTuning | kFp8TuneLoaderWarp | kFp8TuneStmatrix;
// 171616, the dispatch's: 40544 with the hoisted transpose addresses, bit-exact with it. Call D
// (two rounds, the same run): D 128 771-777 / 748-754 against 772-799 / 737-761, D 256 869-871 /
// 820-830 against 824-871 / 789-823 (the same kernel built twice read 3 % apart in call C).
inline constexpr int kFp8DefaultTuning = kFp8SplitStmatrixTuning | kFp8TuneHoistedAddresses;
// 269920: 3680's consumers with the split producer and Vᵀ from the pre-pass.
inline constexpr int kFp8CopiedVtTuning = kFp8BaseTuning | kFp8TuneLoaderWarp | kFp8TuneCopiedVt;
// 794208: 269920 with 128-key tiles at D 256 (the same kernel as 269920 at D 128).
inline constexpr int kFp8WideTuning = kFp8CopiedVtTuning | kFp8TuneWideTiles;

// The built variants: the dispatch's, 40544 and 3680 (what it was measured against), the exact
// softmax (SharpScoresMoveTheBases' reference). The others measured in this and the fourth
// session are in docs/kernels.md and no longer built.
inline constexpr int kFp8BuiltTunings[] = {
    kFp8DefaultTuning,
    kFp8CopiedVtTuning,
    kFp8WideTuning,
    kFp8SplitStmatrixTuning,
    kFp8BaseTuning,
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
