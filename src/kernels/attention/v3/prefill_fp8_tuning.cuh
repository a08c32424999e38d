// The variants of the v3 FP8 prefill kernel: kFp8Tune* bits, template parameters of the kernel
// (prefill_fp8_kernel.cuh), so each built variant is its own kernel and the dispatch's pays no
// branch for the others. PrefillFp8Args::tuning picks one of kFp8BuiltTunings at launch
// (set_fp8_tuning, for benches comparing them in one run).
#pragma once

namespace pagedattn::kernels::attention::v3 {

// A quarter of the softmax's exponentials on the FMA pipe (device/exp2_fma.cuh; half and an
// eighth measured slower and were dropped); the exact softmax's options: O's rescale skipped by
// warps where no row maximum grew (alpha = 1 exactly), S_i issued before waiting for Vᵀ_{i-1}
// (the producer's transpose), P·V after; and the consumers' turns left out.
inline constexpr int kFp8TuneExp2FmaQuarter = 1;
inline constexpr int kFp8TuneSkipRescale = 4;
inline constexpr int kFp8TuneEarlyScores = 8;
inline constexpr int kFp8TuneNoTurns = 16;  // no ping-pong: each consumer issues when ready
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
// At D 128: KV tiles of 192 keys, not 128 (two stages, not three; 64-key TMA boxes, as tiles
// straddle 128-token pages), to spread each tile's fixed costs (row maxima and their shuffles,
// the barriers, the turns, the rescale test) over 1.5x the keys (FlashAttention-3 takes 160-224
// keys for FP8 at D 128). S is 96 registers (an N 128 and an N 64 wgmma), P 24; no spill at 216.
// Call B (fifth session), over the same variant with 128-key tiles: 3680 + 192 keys 721-722 /
// 649-672 (non-causal / causal) against 698-728 / 661-697, with stmatrix 724 / 688-690 against
// 753-758 / 718-723 (-4 %); 160 keys (an N 32 wgmma) -10 to -17 %, dropped. No effect at D 256
// (the same kernel as without the bit).
inline constexpr int kFp8TuneKv192 = 65536;
constexpr int fp8_kv_tile_keys(int d, int tuning) {
  return d == 128 ? ((tuning & kFp8TuneKv192) ? 192 : 128) : 64;
}
// The ldmatrix transpose stores each unit by one stmatrix.x4, not four 32-bit stores (and their
// four swizzled addresses): about a third fewer producer instructions per V tile.
inline constexpr int kFp8TuneStmatrix = 32768;
// With kFp8TuneStmatrix: each transpose unit's two addresses as a lane constant plus a term of
// the unit's key group and one of its column pair (a swizzled row's chunk order depends on the
// row mod 8 alone, which is the lane's), in place of two full swizzle computations per unit.
// (Bit 8192, two units' ldmatrix in flight, lost 10-20 % in calls A and C and is gone.)
inline constexpr int kFp8TuneHoistedAddresses = 131072;
// Keys per TMA box of the K/V tensor map for tiles of tile_keys: the largest power of two that
// divides it (the whole tile at 64 or 128, 64 at 192), so that with pages of a multiple of 128
// tokens every box lies inside one page.
constexpr int fp8_kv_box_keys(int tile_keys) {
  return tile_keys & -tile_keys;
}
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
inline constexpr int kFp8DefaultTuning = kFp8BaseTuning | kFp8TuneLoaderWarp | kFp8TuneStmatrix;

// The built variants: the dispatch's and those V3Fp8Bench times beside it (what each piece adds or
// costs).
inline constexpr int kFp8BuiltTunings[] = {
    kFp8DefaultTuning,
    kFp8BaseTuning,
    kFp8ExactTuning,
    kFp8ExactTuning | kFp8TuneLdsmTranspose,
    kFp8LazyTree | kFp8TuneDeepTranspose | kFp8TuneLdsmTranspose,
    kFp8BaseTuning | kFp8TuneNoTurns,
    kFp8BaseTuning | kFp8TuneExp2FmaQuarter,
    // The split producer alone (call A of the fifth session: D 128 causal 634 against 3680's 688,
    // D 256 noise), the stmatrix stores alone.
    kFp8BaseTuning | kFp8TuneLoaderWarp,
    kFp8BaseTuning | kFp8TuneStmatrix,
    // On the dispatch's, call C (TFLOP/s, two rounds, against 40544's 772-806 / 736-761 at D 128
    // non-causal / causal and 811-862 / 774-824 at D 256): 192-key tiles 741-744 / 692-706 at
    // D 128; a quarter of the exponentials on the FMA pipe 760-767 / 711-715 and 800-805 /
    // 755-773 (an eighth: 734 / 699-704, dropped); no turns 764-776 / 721-732 and 813-814 /
    // 778-783. Two units' ldmatrix in flight (-10 %) and Q converted from global memory with a
    // third stage at D 256 (-5 to -10 %) are gone.
    kFp8DefaultTuning | kFp8TuneKv192,
    kFp8DefaultTuning | kFp8TuneExp2FmaQuarter,
    kFp8DefaultTuning | kFp8TuneNoTurns,
    // Written for call D: the hoisted transpose addresses.
    kFp8DefaultTuning | kFp8TuneHoistedAddresses,
};
constexpr bool fp8_tuning_built(int tuning) {
  for (int built : kFp8BuiltTunings) {
    if (built == tuning) return true;
  }
  return false;
}
static_assert(fp8_tuning_built(kFp8DefaultTuning), "the dispatch's variant must be built");

}  // namespace pagedattn::kernels::attention::v3
