// A consumer warpgroup of the v3 prefill kernel: for its 64 query rows of each work tile and every
// KV tile, S = Q·Kᵀ by wgmma from shared memory, mask (boundary tiles only), online softmax in
// registers, O += P·V by wgmma with P from registers; then the normalised output and the LSE.
//
// Each thread holds two rows (g and g + 8 of its warp's 16) and, per row, a quarter of the
// columns of S (kBlockN / 4) and of O (D / 4): element 4j + 2h + e of an accumulator is row h,
// column 8j + 2t + e (wgmma.cuh). A row's four threads are the lanes of one quad, so row maxima
// take two shuffles. O is held in chunks of at most 128 columns (one P·V wgmma each).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/convert.cuh"
#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/mask.h"
#include "kernels/attention/v3/prefill_shape.cuh"
#include "kernels/attention/v3/prefill_tiles.cuh"

namespace pagedattn::kernels::attention::v3 {

struct RowState {
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
};

// Issues S = Q_rows · K_tileᵀ over the head columns (k16 steps, four per panel) as one group. The
// caller fences before and waits after.
template <int kD>
__device__ __forceinline__ void issue_scores(float (&s)[PrefillShape<kD>::kScoreRegs],
                                             uint32_t q_base, uint32_t k_base) {
  using S = PrefillShape<kD>;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    device::wgmma_k16_ss<__nv_bfloat16, 0>(
        s, device::wgmma_desc_sw128(q_base + (kk / 4) * S::kQPanelBytes + (kk % 4) * 32, 16, 1024),
        device::wgmma_desc_sw128(k_base + (kk / 4) * S::kKvPanelBytes + (kk % 4) * 32, 16, 1024),
        kk > 0);
  }
  device::wgmma_commit_group();
}

// Issues O += P · V_tile as one group, P as bf16 A fragments (one per 16 keys), V MN-major (k16
// steps of 16 rows); O chunk c covers V's panels 2c and 2c + 1 (one panel at D 64).
template <int kD>
__device__ __forceinline__ void issue_pv(
    float (&o)[PrefillShape<kD>::kOChunks][PrefillShape<kD>::kOChunkRegs],
    const uint32_t (&p)[PrefillShape<kD>::kKeySteps][4], uint32_t v_base) {
  using S = PrefillShape<kD>;
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
    for (int kk = 0; kk < S::kKeySteps; ++kk) {
      const uint32_t chunk = v_base + c * (S::kOChunkCols / 64) * S::kKvPanelBytes;
      device::wgmma_k16_rs<__nv_bfloat16, 1>(
          o[c], p[kk], device::wgmma_desc_sw128(chunk + kk * 16 * 128, S::kKvPanelBytes, 1024),
          true);
    }
  }
  device::wgmma_commit_group();
}

// Keys a row does not see (mask.h: past k_len, causally past its position) score -inf: a select,
// so NaN in unused page slots cannot leak.
template <int kRegs>
__device__ __forceinline__ void mask_tile(float (&s)[kRegs], const PrefillArgs& a,
                                          const PrefillTile& w, int row, int key0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const KeyRange<int> seen = visible_keys(a.mask, w.k_len, row + 8 * h + w.k_len - w.q_len);
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * j + 2 * t + e;
        if (key < seen.lo || key > seen.hi) s[4 * j + 2 * h + e] = -INFINITY;
      }
    }
  }
}

// Online softmax over the tile, in place: S becomes P, the sums and maxima advance, and alpha is
// the factor O must be rescaled by (done by the caller once no P·V group is running).
template <int kRegs>
__device__ __forceinline__ void softmax_tile(float (&s)[kRegs], RowState& st, float scale_log2,
                                             float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = st.m[h];
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
      mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float offset = mx == -INFINITY ? 0.0f : mx * scale_log2;  // no visible key yet: no NaN
    alpha[h] = device::fast_exp2(st.m[h] * scale_log2 - offset);
    st.m[h] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = device::fast_exp2(fmaf(x, scale_log2, -offset));
        sum += x;
      }
    }
    st.l[h] = st.l[h] * alpha[h] + sum;
  }
}

template <int kChunks, int kRegs>
__device__ __forceinline__ void rescale(float (&o)[kChunks][kRegs], const float (&alpha)[2]) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) o[c][i] *= alpha[(i / 2) % 2];
  }
}

// P as the A fragments of P·V: keys 16kk..16kk+15 are S columns of n8 blocks 2kk and 2kk + 1.
template <int kSteps>
__device__ __forceinline__ void pack_p(const float (&s)[4 * kSteps * 2], uint32_t (&p)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      p[kk][r] = device::pack_float2<__nv_bfloat16>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }
  }
}

// Normalises and stores the rows that belong to the request, columns below kD (at D 96 the
// chunk's columns 96..127 are not the output's); LSE in natural log.
template <int kD, int kChunks, int kRegs>
__device__ __forceinline__ void store_rows(const float (&o)[kChunks][kRegs], const RowState& st,
                                           const PrefillArgs& a, const PrefillTile& w, int row) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = row + 8 * h;
    if (r >= w.q_len) continue;
    const int64_t token = w.q_start + r;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    uint16_t* dst = a.out + token * a.out_token_stride + w.head * a.out_head_stride + 2 * t;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kRegs / 4; ++j) {
        if (c * 2 * kRegs + 8 * j >= kD) break;
        *reinterpret_cast<uint32_t*>(dst + c * 2 * kRegs + 8 * j) =
            device::pack_float2<__nv_bfloat16>(o[c][4 * j + 2 * h] * inv,
                                               o[c][4 * j + 2 * h + 1] * inv);
      }
    }
    if (a.lse != nullptr && t == 0) {
      a.lse[w.head * a.lse_head_stride + token] =
          l > 0.0f ? st.m[h] * a.scale + logf(l) : -INFINITY;
    }
  }
}

// The consumer warpgroups take turns issuing their matrix products, in a ring (named barrier
// 1 + c is consumer c's turn; "ping-pong" with two), so that one's softmax runs while another's
// products keep the tensor cores busy. All walk the same work tiles, so the ring runs on across
// tiles.
struct IssueTurns {
  int consumer;
  int consumers;
  __device__ __forceinline__ void start() const {
    if (consumer == consumers - 1) device::named_barrier_arrive(1, 256);  // consumer 0 goes first
  }
  __device__ __forceinline__ void begin() const { device::named_barrier_sync(1 + consumer, 256); }
  // The CTA's last turn of the last consumer hands nothing on: consumer 0 has no turn left.
  __device__ __forceinline__ void end(bool last) const {
    if (!(last && consumer == consumers - 1)) {
      device::named_barrier_arrive(1 + (consumer + 1) % consumers, 256);
    }
  }
};

// Where a consumer is in the ring and in its tiles, carried from one work tile to the next.
struct ConsumerPosition {
  int use = 0;         // of the K/V ring
  int tile_count = 0;  // work tiles done (the phase of q_full)
};

// One work tile for consumer warpgroup `turns.consumer`. Step i issues S_i = Q·K_iᵀ, then
// O += P_{i-1}·V_{i-1}; it waits for S_i only and runs its softmax while that P·V still runs, then
// rescales O once it is done (intra-warpgroup overlap). Q is released once the tile's last S is
// done, so the producer loads the next tile's Q during the last P·V and the stores. `last_tile`:
// no work tile follows in this CTA.
template <int kD>
__device__ __forceinline__ void consume_tile(const PrefillArgs& a, const PrefillTile& w,
                                             PrefillSmem<kD>& s, const IssueTurns& turns,
                                             bool last_tile, ConsumerPosition& pos) {
  using S = PrefillShape<kD>;
  const int tid = threadIdx.x % 128;
  const int first_row = w.q0 + turns.consumer * S::kRowsPerConsumer;  // of the warpgroup
  const int row = first_row + 16 * (tid / 32) + (tid % 32) / 4;       // this thread's row g
  const uint32_t q_base = device::smem_addr(s.q) + turns.consumer * S::kRowsPerConsumer * 128;
  const KeyRange<int> first_row_keys = visible_keys(a.mask, w.k_len, first_row + w.k_len - w.q_len);
  float o[S::kOChunks][S::kOChunkRegs];
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
    for (int i = 0; i < S::kOChunkRegs; ++i) o[c][i] = 0.0f;
  }
  RowState st;
  float sc[S::kScoreRegs], alpha[2];
  uint32_t p[S::kKeySteps][4];
  // Scores of tile i: mask on boundary tiles, softmax.
  auto scores_to_p = [&](int i) {
    const int key0 = i * S::kBlockN;
    // Only tiles past some row's last visible key need the mask (the warpgroup's first row sees
    // the fewest keys).
    if (key0 + S::kBlockN - 1 > first_row_keys.hi) mask_tile(sc, a, w, row, key0);
    softmax_tile(sc, st, a.scale_log2, alpha);
  };
  auto stage_of = [&](int i) { return (pos.use + i) % S::kStages; };
  auto parity_of = [&](int i) { return static_cast<uint32_t>(((pos.use + i) / S::kStages) & 1); };
  device::mbarrier_wait(&s.q_full, pos.tile_count & 1);
  device::mbarrier_wait(&s.k_full[stage_of(0)], parity_of(0));
  turns.begin();
  device::wgmma_fence();
  issue_scores<kD>(sc, q_base, device::smem_addr(s.k[stage_of(0)]));
  turns.end(false);
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(sc);
  device::mbarrier_arrive(&s.k_empty[stage_of(0)]);
  scores_to_p(0);
  pack_p(sc, p);  // O is still zero: nothing to rescale
  for (int i = 1; i < w.num_kv_tiles; ++i) {
    const int stage = stage_of(i), prev = stage_of(i - 1);
    device::mbarrier_wait(&s.k_full[stage], parity_of(i));
    device::mbarrier_wait(&s.v_full[prev], parity_of(i - 1));
    turns.begin();
    device::wgmma_fence();
    issue_scores<kD>(sc, q_base, device::smem_addr(s.k[stage]));
    issue_pv<kD>(o, p, device::smem_addr(s.v[prev]));
    turns.end(false);
    device::wgmma_wait_group<1>();
    device::wgmma_fence_operands(sc);
    device::mbarrier_arrive(&s.k_empty[stage]);
    scores_to_p(i);
    device::wgmma_wait_group<0>();
#pragma unroll
    for (int c = 0; c < S::kOChunks; ++c) device::wgmma_fence_operands(o[c]);
    device::mbarrier_arrive(&s.v_empty[prev]);
    rescale(o, alpha);
    pack_p(sc, p);
  }
  device::mbarrier_arrive(&s.q_empty);  // every S of the tile is complete
  const int last = stage_of(w.num_kv_tiles - 1);
  device::mbarrier_wait(&s.v_full[last], parity_of(w.num_kv_tiles - 1));
  turns.begin();
  device::wgmma_fence();
  issue_pv<kD>(o, p, device::smem_addr(s.v[last]));
  turns.end(last_tile);
  device::wgmma_wait_group<0>();
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) device::wgmma_fence_operands(o[c]);
  device::mbarrier_arrive(&s.v_empty[last]);
  store_rows<kD>(o, st, a, w, row);
  pos.use += w.num_kv_tiles;
  ++pos.tile_count;
}

// Run by consumer warpgroup `consumer` (0 .. kConsumers - 1): the CTA's work tiles in order.
template <int kD>
__device__ __forceinline__ void consume(const PrefillArgs& a, int total_tiles, PrefillSmem<kD>& s,
                                        int consumer) {
  const IssueTurns turns{consumer, PrefillShape<kD>::kConsumers};
  TileWalk walk{total_tiles};
  PrefillTile w, next;
  if (!walk.find<kD>(a, w)) return;
  turns.start();
  ConsumerPosition pos;
  for (;;) {
    walk.advance();
    const bool more = walk.find<kD>(a, next);
    consume_tile<kD>(a, w, s, turns, !more, pos);
    if (!more) return;
    w = next;
  }
}

}  // namespace pagedattn::kernels::attention::v3
