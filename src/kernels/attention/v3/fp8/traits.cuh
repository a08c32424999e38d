// Geometry, shared memory and arguments of the v3 FP8 prefill kernel: e4m3 K/V from the paged
// cache, Q converted to e4m3 by the producer (or given in e4m3), both products on the FP8 tensor
// cores (wgmma k32). Head sizes 128 and 256, pages holding whole KV tiles (TMA).
//
// The work tiles and query rows per consumer are the bf16 kernel's (PrefillTraits), so its
// scheduler (v3/tile_scheduler.cuh) walks the same tiles; KV tiles hold the bf16 kernel's keys or,
// at D 256, the wide ones (Fp8Tiles, v3/fp8/tile_configs.cuh: 128 keys), and TMA copies K in one
// box per tile. FP8 wgmma reads both operands K-major, so P·V reads Vᵀ (D
// rows of keys), which a pre-pass writes once per launch (v3/fp8/v_transpose.h) and the producer
// copies as it is. Tiles are 128-byte-swizzled panels of 128 FP8 columns (one panel per 128 head
// columns for Q and K; Vᵀ: one panel of D rows of 128 bytes per 128 keys, a 64-key tile at D 256
// reading half of one).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention/v3/fp8/tile_configs.cuh"
#include "kernels/attention/v3/traits.cuh"

namespace pagedattn::kernels::attention::v3 {

// The pre-pass's Vᵀ images (v3/fp8/v_transpose.h) for KV tiles of tile_keys keys: keys per image (the
// tile's, or 128 where tiles are smaller) and bytes at head size d (a panel of d rows x 128 bytes
// per 128 keys). An image is the bytes of one Vᵀ ring slot.
constexpr int fp8_vt_image_keys(int tile_keys) {
  return tile_keys < 128 ? 128 : tile_keys;
}
constexpr int64_t fp8_vt_image_bytes(int tile_keys, int d) {
  return (fp8_vt_image_keys(tile_keys) + 127) / 128 * int64_t{d} * 128;
}

// kN: keys per KV tile (fp8_kv_tile_keys): the bf16 kernel's, or at D 256 the wide ones (128).
template <int kD, int kN = PrefillTraits<kD>::kBlockN>
struct PrefillFp8Traits {
  static_assert(kD == 128 || kD == 256, "v3 FP8 prefill head sizes: 128, 256");
  static_assert(kN == PrefillTraits<kD>::kBlockN || kN == fp8_kv_tile_keys(kD, Fp8Tiles::kWide),
                "the bf16 kernel's KV tiles, or the wide ones");
  using Base = PrefillTraits<kD>;
  static constexpr bool kWide = kN != Base::kBlockN;
  static constexpr int kConsumers = Base::kConsumers;
  static constexpr int kBlockM = Base::kBlockM;         // 128: one producer thread per query row
  static constexpr int kBlockN = kN;
  static constexpr int kRowsPerConsumer = Base::kRowsPerConsumer;
  static constexpr int kThreads = Base::kThreads;
  // Registers after setmaxnreg: the two roles share what the launch allocates, 384 threads x 168
  // (__launch_bounds__(384, 1)) = 64,512, and asking for more hangs setmaxnreg.inc: 128 * 72 +
  // 256 * 216. Wide tiles: S of 128 keys beside D 256's O needs 240 (with fewer, ptxas serialises
  // the wgmmas: C7512), and the producer, which only loads and converts Q, gives them up: 128 * 24
  // + 256 * 240; at D 256 the kernel spills 44 bytes with either tiles (a P·V chunk's part beside
  // O). At D 128, S, O, P and the part of O that P·V adds fit in 232 beside S_{i+1}, and the
  // producer's 40 do not spill.
  static constexpr int kProducerRegisters = kD == 128 ? 40 : kWide ? 24 : 72;
  static constexpr int kConsumerRegisters = kD == 128 ? 232 : kWide ? 240 : 216;
  // S_{i+1} issued beside P_i·V_i (consume_tile_fp8_overlapped): the part needs O's registers
  // again, which only D 128's single O chunk leaves.
  static constexpr bool kOverlapped = kD == 128;
  static_assert(128 * kProducerRegisters + 256 * kConsumerRegisters <= 168 * kThreads,
                "the register split must fit the launch's allocation");
  static_assert(kConsumers == 2, "the register split is for two consumers");
  static_assert(kBlockM == 128, "the producer converts one query row per thread");
  // Per stage: K and Vᵀ, 32 KB at D 128 (three stages + Q 16 KB + bf16 Q 32 KB: 144 KB), 48 KB at
  // D 256 (two + Q 32 KB + bf16 Q 64 KB: 192 KB; wide: 64 KB, 224 KB of
  // the 227).
  static constexpr int kStages = kD == 128 ? 3 : 2;
  static constexpr int kPanels = kD / 128;
  static constexpr int kQPanelBytes = kBlockM * 128;
  static constexpr int kKvPanelBytes = kBlockN * 128;
  static constexpr int kQTileBytes = kPanels * kQPanelBytes;
  static constexpr int kKvTileBytes = kPanels * kKvPanelBytes;
  static constexpr int kVtPanelBytes = kD * 128;  // D rows of 128 bytes: 128 keys
  static constexpr int kVtTileBytes = static_cast<int>(fp8_vt_image_bytes(kN, kD));
  static constexpr int kQStagePanelBytes = kBlockM * 128;  // bf16 Q as loaded: 64 columns per panel
  static_assert(kQStagePanelBytes == kQPanelBytes, "an e4m3 Q stage is s.q's layout");
  static constexpr int kQStageBytes = kD / 64 * kQStagePanelBytes;
  static constexpr int kScoreRegs = kBlockN / 2;
  static constexpr int kKeySteps = kBlockN / 32;  // k32 steps of P·V
  static constexpr int kOChunkCols = 128;         // O columns (Vᵀ rows) per P·V wgmma
  static constexpr int kOChunks = kD / kOChunkCols;
  static constexpr int kOChunkRegs = kOChunkCols / 2;
};

template <int kD, int kN = PrefillTraits<kD>::kBlockN>
struct PrefillFp8Smem {
  using S = PrefillFp8Traits<kD, kN>;
  uint8_t q[S::kQTileBytes];
  uint8_t k[S::kStages][S::kKvTileBytes];
  uint8_t vt[S::kStages][S::kVtTileBytes];  // the pre-pass's images, copied
  uint8_t q_stage[S::kQStageBytes];         // the next work tile's Q, by TMA (e4m3: half)
  uint8_t ones[1024];  // e4m3 ones: B of the row sums' wgmma, 1024-aligned
  float q_descale[S::kBlockM];  // per query row: 1 / the row's Q scale
  uint64_t q_full, q_empty;
  uint64_t q_stage_full, q_stage_empty;  // q_stage_empty: the producer has converted it
  uint64_t k_full[S::kStages], k_empty[S::kStages];
  uint64_t vt_full[S::kStages], vt_empty[S::kStages];
};
template <int kD, int kN = PrefillTraits<kD>::kBlockN>
constexpr size_t prefill_fp8_smem_bytes() {
  return sizeof(PrefillFp8Smem<kD, kN>) + 1024;  // room to align the tiles to 1024 bytes
}

// The bf16 kernel's arguments (kv_cache unused: every K/V tile comes by TMA) and what FP8 adds.
struct PrefillFp8Args {
  PrefillArgs base;
  const float* k_scale;  // [1] or [num_kv_heads]: the cache holds K / k_scale
  const float* v_scale;
  bool per_head_scales;
  // Q as given in e4m3 (PagedAttentionParams::q_descale: its scale per request and KV head, null
  // for 1) rather than bf16 to convert.
  bool q_e4m3;
  const float* q_descale;
  int64_t q_descale_req_stride;
  int64_t q_descale_head_stride;
  // The pre-pass's Vᵀ images (v3/fp8/v_transpose.h), images_per_req per (request, KV head).
  const uint8_t* vt_images;
  int64_t vt_images_per_req;
};

}  // namespace pagedattn::kernels::attention::v3
