// A consumer warpgroup of the v3 FP8 prefill kernel: both products on the FP8 tensor cores, S_{i+1}
// issued beside P_i·V_i at D 128 (consume_tile_fp8_overlapped), each KV tile in turn at D 256
// (consume_tile_fp8), ping-pong turns between the warpgroups, and three scales:
// - S = Q8·K8ᵀ is scale * k_scale * q_descale(row) times the true Q·Kᵀ; the row's factor goes into
//   its softmax scale (softmax_tile_fp8_lazy), exactly;
// - P = exp2(score - base + offset) stays below e4m3's 448 (v3/fp8/softmax.cuh: the lazy
//   softmax); the row sum, by the tensor cores from the rounded values that P·V uses, cancels
//   2^offset in O / l, and the LSE subtracts it;
// - O is v_scale times Σ P·V8 (applied once, before the store).
// Each tile's P·V and row sums start from zero and join O and l in float32 (issue_pv_chunk_fp8).
#pragma once

#include <cmath>
#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/mainloop_mma.cuh"
#include "kernels/attention/v3/fp8/operands.cuh"
#include "kernels/attention/v3/fp8/traits.cuh"
#include "kernels/attention/v3/fp8/softmax.cuh"
#include "kernels/attention/v3/fp8/v_transpose.h"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

// S = Q_rows · K_tileᵀ, one group: per k32 step over the head columns (four per 128-column
// panel), one wgmma of N 128 per 128 keys, or one of N 64 (64-key tiles).
template <int kD, int kN>
__device__ __forceinline__ void issue_scores_fp8(float (&s)[PrefillFp8Traits<kD, kN>::kScoreRegs],
                                                 uint32_t q_base, uint32_t k_base) {
  using S = PrefillFp8Traits<kD, kN>;
  constexpr int kWhole = kN / 128;        // N 128 products
  constexpr bool kRest = kN % 128 == 64;  // one N 64 product after them
  static_assert(kN == 128 || kN == 64, "tiles of 64 or 128 keys");
  const uint64_t q_desc = device::wgmma_desc_sw128(q_base, 16, 1024);
  const uint64_t k_desc = device::wgmma_desc_sw128(k_base, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < kD / 32; ++kk) {
    const uint32_t q_step = (kk / 4) * S::kQPanelBytes + (kk % 4) * 32;
    const uint32_t k_step = (kk / 4) * S::kKvPanelBytes + (kk % 4) * 32;
#pragma unroll
    for (int n = 0; n < kWhole; ++n) {
      device::wgmma_k32_e4m3_ss(*reinterpret_cast<float(*)[64]>(s + 64 * n),
                                device::wgmma_desc_advance(q_desc, q_step),
                                device::wgmma_desc_advance(k_desc, k_step + n * 128 * 128), kk > 0);
    }
    if constexpr (kRest) {
      device::wgmma_k32_e4m3_ss(*reinterpret_cast<float(*)[32]>(s + 64 * kWhole),
                                device::wgmma_desc_advance(q_desc, q_step),
                                device::wgmma_desc_advance(k_desc, k_step + kWhole * 128 * 128),
                                kk > 0);
    }
  }
  device::wgmma_commit_group();
}

// P · V_tile's O chunk c (Vᵀ rows 128c..128c+127 of each 128-key panel; Vᵀ K-major, k32 steps of
// 32 keys) into `part` from zero, and with c = 0 the tile's row sums into `l_part` (P · ones: the
// m64n8 accumulators), not 64 adds per thread and tile. From zero because the FP8 tensor cores
// keep about 14 bits of an accumulator (DeepSeek-V3, FlashAttention-3's FP8 path): added to a
// whole row's running sum, each of 32768 keys' terms fell below them (rel_frob 0.63 on an H100);
// one tile's sum stays within them and joins O and l in float32 (two-level accumulation).
template <int kD, int kN>
__device__ __forceinline__ void issue_pv_chunk_fp8(
    float (&part)[PrefillFp8Traits<kD, kN>::kOChunkRegs], float (&l_part)[4],
    const uint32_t (&p)[PrefillFp8Traits<kD, kN>::kKeySteps][4], uint32_t vt_base, uint32_t ones,
    int c) {
  using S = PrefillFp8Traits<kD, kN>;
  const uint64_t vt_desc = device::wgmma_desc_sw128(vt_base, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < S::kKeySteps; ++kk) {
    const uint32_t offset = (kk / 4) * S::kVtPanelBytes + c * S::kOChunkCols * 128 + (kk % 4) * 32;
    device::wgmma_k32_e4m3_rs(part, p[kk], device::wgmma_desc_advance(vt_desc, offset), kk > 0);
  }
  if (c == 0) {
#pragma unroll
    for (int kk = 0; kk < S::kKeySteps; ++kk) {
      device::wgmma_k32_e4m3_rs_n8(l_part, p[kk], device::wgmma_desc_sw128(ones, 16, 1024), kk > 0);
    }
  }
  device::wgmma_commit_group();
}

// Where a consumer is in the rings and in its tiles, carried from one work tile to the next.
struct Fp8ConsumerPosition {
  int use = 0;         // of the K and Vᵀ rings
  int tile_count = 0;  // work tiles done (the phase of q_full)
};

// One work tile for consumer warpgroup `turns.consumer`, each KV tile in turn: S_i on the tensor
// cores, its lazy softmax (O and l rescaled only when a row's base moved in the warp), then P_i·V_i
// chunk by chunk into a part from zero that joins O in float32 (issue_pv_chunk_fp8). Serial within
// the warpgroup (D 256: S_{i+1} beside P_i·V_i would need registers beyond O's 128 and S's); the
// other consumer's products fill the tensor cores meanwhile (ping-pong turns).
template <int kD, int kN>
__device__ __forceinline__ void consume_tile_fp8(
    const PrefillFp8Args& fa, const PrefillTile& w, PrefillFp8Smem<kD, kN>& s,
    const IssueTurns& turns, bool last_tile, Fp8ConsumerPosition& pos) {
  using S = PrefillFp8Traits<kD, kN>;
  const PrefillArgs& a = fa.base;
  const int tid = threadIdx.x % 128;
  const int local_row = turns.consumer * S::kRowsPerConsumer + 16 * (tid / 32) + (tid % 32) / 4;
  const int first_row = w.q0 + turns.consumer * S::kRowsPerConsumer;
  const int row = w.q0 + local_row;
  const uint32_t q_base = device::smem_addr(s.q) + turns.consumer * S::kRowsPerConsumer * 128;
  const mask::KeyRange<int> first_row_keys = mask::visible_keys(a.mask, w.k_len, first_row + w.k_len - w.q_len);
  const int scale_index = fa.per_head_scales ? w.kv_head : 0;
  const float k_scale = fa.k_scale[scale_index], v_scale = fa.v_scale[scale_index];
  float o[S::kOChunks][S::kOChunkRegs];
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
    for (int i = 0; i < S::kOChunkRegs; ++i) o[c][i] = 0.0f;
  }
  RowState st;
  const uint32_t ones = device::smem_addr(s.ones);
  float sc[S::kScoreRegs], alpha[2], scale_log2[2];
  uint32_t p[S::kKeySteps][4];
  auto stage_of = [&](int i) { return (pos.use + i) % S::kStages; };
  // Vᵀ of KV tile i: its ring slot holds the tile's image, or with 64-key tiles (D 256) a
  // 128-key image whose odd tiles start at byte 64 of each row.
  auto vt_of = [&](int i) {
    return device::smem_addr(s.vt[stage_of(i)]) + (i * S::kBlockN) % fp8_vt_image_keys(kN);
  };
  auto parity_of = [&](int i) { return static_cast<uint32_t>(((pos.use + i) / S::kStages) & 1); };
  device::mbarrier_wait(&s.q_full, pos.tile_count & 1);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    scale_log2[h] = a.scale_log2 * k_scale * s.q_descale[local_row + 8 * h];
  }
  for (int i = 0; i < w.num_kv_tiles; ++i) {
    const int stage = stage_of(i);
    const bool last_kv = i == w.num_kv_tiles - 1;
    device::mbarrier_wait(&s.k_full[stage], parity_of(i));
    turns.begin();
    device::wgmma_fence();
    issue_scores_fp8<kD, kN>(sc, q_base, device::smem_addr(s.k[stage]));
    turns.end(false);
    device::wgmma_wait_group<0>();
    device::wgmma_fence_operands(sc);
    device::mbarrier_arrive(&s.k_empty[stage]);
    if (last_kv) device::mbarrier_arrive(&s.q_empty);  // every S of the tile is done, the descales read
    const int key0 = i * S::kBlockN;
    if (key0 + S::kBlockN - 1 > first_row_keys.hi) mask_tile(sc, a, w, row, key0);
    if (__any_sync(0xffffffffu, softmax_tile_fp8_lazy(sc, st, scale_log2, alpha))) {
      rescale(o, alpha);  // else every alpha of the warp is exactly 1
      st.l[0] *= alpha[0];
      st.l[1] *= alpha[1];
    }
    pack_p_fp8(sc, p);
    device::mbarrier_wait(&s.vt_full[stage], parity_of(i));
#pragma unroll
    for (int c = 0; c < S::kOChunks; ++c) {
      float part[S::kOChunkRegs];
      float l_part[4];  // rows g, g, g + 8, g + 8
      turns.begin();
      device::wgmma_fence();
      issue_pv_chunk_fp8<kD, kN>(part, l_part, p, vt_of(i), ones, c);
      turns.end(last_tile && last_kv && c == S::kOChunks - 1);
      device::wgmma_wait_group<0>();
      device::wgmma_fence_operands(part);
#pragma unroll
      for (int j = 0; j < S::kOChunkRegs; ++j) o[c][j] += part[j];
      if (c == 0) {
        device::wgmma_fence_operands(l_part);
        st.l[0] += l_part[0];
        st.l[1] += l_part[2];
      }
    }
    device::mbarrier_arrive(&s.vt_empty[stage]);
  }
  store_rows_fp8(o, st, scale_log2, kLazyOffset, v_scale, a, w, row);
  pos.use += w.num_kv_tiles;
  ++pos.tile_count;
}

// One work tile, S_i issued beside P_{i-1}·V_{i-1} (the bf16 kernel's overlap): the softmax of S_i
// runs while that P·V, from zero into a part of its own, is on the tensor cores; then O and l take
// the part and the rescale in one pass. One O chunk (D 128): the part's registers beside S, O and
// P fit with 128-key tiles.
template <int kD, int kN>
__device__ __forceinline__ void consume_tile_fp8_overlapped(
    const PrefillFp8Args& fa, const PrefillTile& w, PrefillFp8Smem<kD, kN>& s,
    const IssueTurns& turns, bool last_tile, Fp8ConsumerPosition& pos) {
  using S = PrefillFp8Traits<kD, kN>;
  static_assert(S::kOChunks == 1, "one O chunk: a part of O's size beside S");
  const PrefillArgs& a = fa.base;
  const int tid = threadIdx.x % 128;
  const int local_row = turns.consumer * S::kRowsPerConsumer + 16 * (tid / 32) + (tid % 32) / 4;
  const int first_row = w.q0 + turns.consumer * S::kRowsPerConsumer;
  const int row = w.q0 + local_row;
  const uint32_t q_base = device::smem_addr(s.q) + turns.consumer * S::kRowsPerConsumer * 128;
  const mask::KeyRange<int> first_row_keys = mask::visible_keys(a.mask, w.k_len, first_row + w.k_len - w.q_len);
  const int scale_index = fa.per_head_scales ? w.kv_head : 0;
  const float k_scale = fa.k_scale[scale_index], v_scale = fa.v_scale[scale_index];
  float o[1][S::kOChunkRegs];
#pragma unroll
  for (int i = 0; i < S::kOChunkRegs; ++i) o[0][i] = 0.0f;
  RowState st;
  const uint32_t ones = device::smem_addr(s.ones);
  float sc[S::kScoreRegs], alpha[2], scale_log2[2];
  float part[S::kOChunkRegs] = {}, l_part[4] = {};  // read by the wgmmas' asm, which start from zero
  uint32_t p[S::kKeySteps][4];
  auto scores_to_p = [&](int i) {
    const int key0 = i * S::kBlockN;
    if (key0 + S::kBlockN - 1 > first_row_keys.hi) mask_tile(sc, a, w, row, key0);
    return softmax_tile_fp8_lazy(sc, st, scale_log2, alpha);
  };
  auto stage_of = [&](int i) { return (pos.use + i) % S::kStages; };
  auto vt_of = [&](int i) {
    return device::smem_addr(s.vt[stage_of(i)]) + (i * S::kBlockN) % fp8_vt_image_keys(kN);
  };
  auto parity_of = [&](int i) { return static_cast<uint32_t>(((pos.use + i) / S::kStages) & 1); };
  auto take_part = [&](bool rescale_too) {
#pragma unroll
    for (int j = 0; j < S::kOChunkRegs; ++j) {
      o[0][j] = rescale_too ? (o[0][j] + part[j]) * alpha[(j / 2) % 2] : o[0][j] + part[j];
    }
    st.l[0] = rescale_too ? (st.l[0] + l_part[0]) * alpha[0] : st.l[0] + l_part[0];
    st.l[1] = rescale_too ? (st.l[1] + l_part[2]) * alpha[1] : st.l[1] + l_part[2];
  };
  device::mbarrier_wait(&s.q_full, pos.tile_count & 1);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    scale_log2[h] = a.scale_log2 * k_scale * s.q_descale[local_row + 8 * h];
  }
  device::mbarrier_wait(&s.k_full[stage_of(0)], parity_of(0));
  turns.begin();
  device::wgmma_fence();
  issue_scores_fp8<kD, kN>(sc, q_base, device::smem_addr(s.k[stage_of(0)]));
  turns.end(false);
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(sc);
  device::mbarrier_arrive(&s.k_empty[stage_of(0)]);
  scores_to_p(0);  // O is still zero: nothing to rescale
  pack_p_fp8(sc, p);
  for (int i = 1; i < w.num_kv_tiles; ++i) {
    const int stage = stage_of(i), prev = stage_of(i - 1);
    device::mbarrier_wait(&s.k_full[stage], parity_of(i));
    turns.begin();
    device::wgmma_fence();
    issue_scores_fp8<kD, kN>(sc, q_base, device::smem_addr(s.k[stage]));
    device::mbarrier_wait(&s.vt_full[prev], parity_of(i - 1));
    issue_pv_chunk_fp8<kD, kN>(part, l_part, p, vt_of(i - 1), ones, 0);
    turns.end(false);
    device::wgmma_wait_group<1>();
    device::wgmma_fence_operands(sc);
    device::mbarrier_arrive(&s.k_empty[stage]);
    const bool grew = scores_to_p(i);
    device::wgmma_wait_group<0>();
    device::wgmma_fence_operands(part);
    device::wgmma_fence_operands(l_part);
    device::mbarrier_arrive(&s.vt_empty[prev]);
    take_part(__any_sync(0xffffffffu, grew));  // else every alpha of the warp is exactly 1
    pack_p_fp8(sc, p);
  }
  device::mbarrier_arrive(&s.q_empty);  // every S of the tile is complete, the descales read
  const int last = stage_of(w.num_kv_tiles - 1);
  device::mbarrier_wait(&s.vt_full[last], parity_of(w.num_kv_tiles - 1));
  turns.begin();
  device::wgmma_fence();
  issue_pv_chunk_fp8<kD, kN>(part, l_part, p, vt_of(w.num_kv_tiles - 1), ones, 0);
  turns.end(last_tile);
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(part);
  device::wgmma_fence_operands(l_part);
  device::mbarrier_arrive(&s.vt_empty[last]);
  take_part(false);
  store_rows_fp8(o, st, scale_log2, kLazyOffset, v_scale, a, w, row);
  pos.use += w.num_kv_tiles;
  ++pos.tile_count;
}

// Run by consumer warpgroup `consumer`: the CTA's work tiles in order.
template <int kD, int kN>
__device__ __forceinline__ void consume_fp8(const PrefillFp8Args& a, int total_tiles,
                                            PrefillFp8Smem<kD, kN>& s, int consumer) {
  constexpr int kConsumers = PrefillFp8Traits<kD, kN>::kConsumers;
  const IssueTurns turns{consumer, kConsumers};
  TileWalk walk{total_tiles};
  PrefillTile w, next;
  if (!walk.find_keys<kD, kN>(a.base, w)) return;
  turns.start();
  Fp8ConsumerPosition pos;
  for (;;) {
    walk.advance();
    const bool more = walk.find_keys<kD, kN>(a.base, next);
    if constexpr (PrefillFp8Traits<kD, kN>::kOverlapped) {
      consume_tile_fp8_overlapped<kD>(a, w, s, turns, !more, pos);
    } else {
      consume_tile_fp8<kD>(a, w, s, turns, !more, pos);
    }
    if (!more) return;
    w = next;
  }
}

}  // namespace pagedattn::kernels::attention::v3
