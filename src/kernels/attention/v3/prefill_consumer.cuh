// A consumer warpgroup of the v3 prefill kernel: for its 64 query rows and every KV tile,
// S = Q·Kᵀ by wgmma from shared memory, mask (boundary tiles only), online softmax in registers,
// O += P·V by wgmma with P from registers; then the normalised output and the LSE.
//
// Each thread holds two rows (g and g + 8 of its warp's 16) and, per row, 32 of the 128 columns of
// S and of O: element 4j + 2h + e is row h, column 8j + 2t + e (wgmma.cuh). A row's four threads
// are the lanes of one quad, so row maxima take two shuffles.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/convert.cuh"
#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/mask.h"
#include "kernels/attention/v3/prefill_producer.cuh"
#include "kernels/attention/v3/prefill_shape.cuh"

namespace pagedattn::kernels::attention::v3 {

struct RowState {
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
};

// Issues S = Q_rows · K_tileᵀ over the 128 head columns (eight k16 steps, two panels) as one
// group. The caller fences before and waits after.
__device__ __forceinline__ void issue_scores(float (&s)[64], uint32_t q_base, uint32_t k_base) {
  using S = PrefillShape;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t step = (kk / 4) * S::kPanelBytes + (kk % 4) * 32;
    device::wgmma_m64n128k16_ss<__nv_bfloat16, 0>(
        s, device::wgmma_desc_sw128(q_base + step, 16, 1024),
        device::wgmma_desc_sw128(k_base + step, 16, 1024), kk > 0);
  }
  device::wgmma_commit_group();
}

// Issues O += P · V_tile as one group, P as bf16 A fragments (one per 16 keys), V MN-major (eight
// k16 steps of 16 rows).
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[8][4],
                                         uint32_t v_base) {
  using S = PrefillShape;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    device::wgmma_m64n128k16_rs<__nv_bfloat16, 1>(
        o, p[kk], device::wgmma_desc_sw128(v_base + kk * 16 * 128, S::kPanelBytes, 1024), true);
  }
  device::wgmma_commit_group();
}

// Keys a row does not see (mask.h: past k_len, causally past its position) score -inf: a select,
// so NaN in unused page slots cannot leak.
__device__ __forceinline__ void mask_tile(float (&s)[64], const PrefillArgs& a,
                                          const PrefillTile& w, int row, int key0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const KeyRange<int> seen = visible_keys(a.mask, w.k_len, row + 8 * h + w.k_len - w.q_len);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
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
__device__ __forceinline__ void softmax_tile(float (&s)[64], RowState& st, float scale_log2,
                                             float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = st.m[h];
#pragma unroll
    for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float offset = mx == -INFINITY ? 0.0f : mx * scale_log2;  // no visible key yet: no NaN
    alpha[h] = device::fast_exp2(st.m[h] * scale_log2 - offset);
    st.m[h] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
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

__device__ __forceinline__ void rescale(float (&o)[64], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] *= alpha[(i / 2) % 2];
}

// P as the A fragments of P·V: keys 16kk..16kk+15 are S columns of n8 blocks 2kk and 2kk + 1.
__device__ __forceinline__ void pack_p(const float (&s)[64], uint32_t (&p)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      p[kk][r] = device::pack_float2<__nv_bfloat16>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }
  }
}

// Normalises and stores the rows that belong to the request; LSE in natural log.
__device__ __forceinline__ void store_rows(const float (&o)[64], RowState& st, const PrefillArgs& a,
                                           const PrefillTile& w, int row) {
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
    for (int j = 0; j < 16; ++j) {
      *reinterpret_cast<uint32_t*>(dst + 8 * j) =
          device::pack_float2<__nv_bfloat16>(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
    if (a.lse != nullptr && t == 0) {
      a.lse[w.head * a.lse_head_stride + token] =
          l > 0.0f ? st.m[h] * a.scale + logf(l) : -INFINITY;
    }
  }
}

// The two consumer warpgroups take turns issuing their matrix products (named barriers 1 and 2,
// "ping-pong"), so that one's softmax runs while the other's products keep the tensor cores busy.
struct IssueTurns {
  int consumer;
  __device__ __forceinline__ void start() const {
    if (consumer == 1) device::named_barrier_arrive(1, 256);  // consumer 0 goes first
  }
  __device__ __forceinline__ void begin() const { device::named_barrier_sync(1 + consumer, 256); }
  // The last turn of consumer 1 hands nothing on: consumer 0 has no turn left.
  __device__ __forceinline__ void end(bool last) const {
    if (!(last && consumer == 1)) device::named_barrier_arrive(2 - consumer, 256);
  }
};

// Run by consumer warpgroup `consumer` (0 or 1). Step i issues S_i = Q·K_iᵀ, then
// O += P_{i-1}·V_{i-1}; it waits for S_i only and runs its softmax while that P·V still runs, then
// rescales O once it is done (intra-warpgroup overlap).
__device__ __forceinline__ void consume(const PrefillArgs& a, const PrefillTile& w, PrefillSmem& s,
                                        int consumer) {
  using S = PrefillShape;
  const int tid = threadIdx.x % 128;
  const int first_row = w.q0 + consumer * S::kRowsPerConsumer;   // of the warpgroup
  const int row = first_row + 16 * (tid / 32) + (tid % 32) / 4;  // this thread's row g
  const uint32_t q_base = device::smem_addr(s.q) + consumer * S::kRowsPerConsumer * 128;
  const IssueTurns turns{consumer};
  const KeyRange<int> first_row_keys = visible_keys(a.mask, w.k_len, first_row + w.k_len - w.q_len);
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  RowState st;
  float sc[64], alpha[2];
  uint32_t p[8][4];
  // Scores of tile i: mask on boundary tiles, softmax.
  auto scores_to_p = [&](int i) {
    const int key0 = i * S::kBlockN;
    // Only tiles past some row's last visible key need the mask (the warpgroup's first row sees
    // the fewest keys).
    if (key0 + S::kBlockN - 1 > first_row_keys.hi) mask_tile(sc, a, w, row, key0);
    softmax_tile(sc, st, a.scale_log2, alpha);
  };
  device::mbarrier_wait(&s.q_full, 0);
  turns.start();
  device::mbarrier_wait(&s.k_full[0], 0);
  turns.begin();
  device::wgmma_fence();
  issue_scores(sc, q_base, device::smem_addr(s.k[0]));
  turns.end(false);
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(sc);
  device::mbarrier_arrive(&s.k_empty[0]);
  scores_to_p(0);
  pack_p(sc, p);  // O is still zero: nothing to rescale
  for (int i = 1; i < w.num_kv_tiles; ++i) {
    const int stage = i % S::kStages, prev = (i - 1) % S::kStages;
    device::mbarrier_wait(&s.k_full[stage], (i / S::kStages) & 1);
    device::mbarrier_wait(&s.v_full[prev], ((i - 1) / S::kStages) & 1);
    turns.begin();
    device::wgmma_fence();
    issue_scores(sc, q_base, device::smem_addr(s.k[stage]));
    issue_pv(o, p, device::smem_addr(s.v[prev]));
    turns.end(false);
    device::wgmma_wait_group<1>();
    device::wgmma_fence_operands(sc);
    device::mbarrier_arrive(&s.k_empty[stage]);
    scores_to_p(i);
    device::wgmma_wait_group<0>();
    device::wgmma_fence_operands(o);
    device::mbarrier_arrive(&s.v_empty[prev]);
    rescale(o, alpha);
    pack_p(sc, p);
  }
  const int last = (w.num_kv_tiles - 1) % S::kStages;
  device::mbarrier_wait(&s.v_full[last], ((w.num_kv_tiles - 1) / S::kStages) & 1);
  turns.begin();
  device::wgmma_fence();
  issue_pv(o, p, device::smem_addr(s.v[last]));
  turns.end(true);
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(o);
  device::mbarrier_arrive(&s.v_empty[last]);
  store_rows(o, st, a, w, row);
}

}  // namespace pagedattn::kernels::attention::v3
