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
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_producer.cuh"
#include "kernels/attention/v3/prefill_shape.cuh"

namespace pagedattn::kernels::attention::v3 {

struct RowState {
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
};

// S = Q_rows · K_tileᵀ over the 128 head columns (eight k16 steps, two panels).
__device__ __forceinline__ void score_tile(float (&s)[64], uint32_t q_base, uint32_t k_base) {
  using S = PrefillShape;
  device::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t step = (kk / 4) * S::kPanelBytes + (kk % 4) * 32;
    device::wgmma_m64n128k16_ss<__nv_bfloat16, 0>(
        s, device::wgmma_desc_sw128(q_base + step, 16, 1024),
        device::wgmma_desc_sw128(k_base + step, 16, 1024), kk > 0);
  }
  device::wgmma_commit_group();
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(s);
}

// O += P · V_tile, P as bf16 A fragments (one per 16 keys), V MN-major (eight k16 steps of 16 rows).
__device__ __forceinline__ void accumulate_tile(float (&o)[64], const uint32_t (&p)[8][4],
                                                uint32_t v_base) {
  using S = PrefillShape;
  device::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    device::wgmma_m64n128k16_rs<__nv_bfloat16, 1>(
        o, p[kk], device::wgmma_desc_sw128(v_base + kk * 16 * 128, S::kPanelBytes, 1024), true);
  }
  device::wgmma_commit_group();
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(o);
}

// Keys past k_len, and causally past each row's position, score -inf (a select, so NaN in unused
// page slots cannot leak).
__device__ __forceinline__ void mask_tile(float (&s)[64], const PrefillArgs& a,
                                          const PrefillTile& w, int row, int key0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int last_key = a.causal ? min(w.k_len - 1, row + 8 * h + w.k_len - w.q_len) : w.k_len - 1;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (key0 + 8 * j + 2 * t + e > last_key) s[4 * j + 2 * h + e] = -INFINITY;
      }
    }
  }
}

// Online softmax over the tile: rescales O and the sums by the new maxima, turns S into P.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&o)[64], RowState& st,
                                             float scale_log2, uint32_t (&p)[8][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = st.m[h];
#pragma unroll
    for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float offset = mx == -INFINITY ? 0.0f : mx * scale_log2;  // no visible key yet: no NaN
    const float alpha = exp2f(st.m[h] * scale_log2 - offset);
    st.m[h] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = exp2f(fmaf(x, scale_log2, -offset));
        sum += x;
        o[4 * j + 2 * h + e] *= alpha;
      }
    }
    st.l[h] = st.l[h] * alpha + sum;
  }
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
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = device::pack_float2<__nv_bfloat16>(
          o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
    if (a.lse != nullptr && t == 0) {
      a.lse[w.head * a.lse_head_stride + token] = l > 0.0f ? st.m[h] * a.scale + logf(l) : -INFINITY;
    }
  }
}

// Run by consumer warpgroup `consumer` (0 or 1).
__device__ __forceinline__ void consume(const PrefillArgs& a, const PrefillTile& w,
                                        PrefillSmem& s, int consumer) {
  using S = PrefillShape;
  const int tid = threadIdx.x % 128;
  const int first_row = w.q0 + consumer * S::kRowsPerConsumer;  // of the warpgroup
  const int row = first_row + 16 * (tid / 32) + (tid % 32) / 4;   // this thread's row g
  const uint32_t q_base = device::smem_addr(s.q) + consumer * S::kRowsPerConsumer * 128;
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  RowState st;
  device::mbarrier_wait(&s.q_full, 0);
  for (int i = 0; i < w.num_kv_tiles; ++i) {
    const int stage = i % S::kStages;
    const uint32_t parity = (i / S::kStages) & 1;
    const int key0 = i * S::kBlockN;
    float sc[64];
    device::mbarrier_wait(&s.k_full[stage], parity);
    score_tile(sc, q_base, device::smem_addr(s.k[stage]));
    device::mbarrier_arrive(&s.k_empty[stage]);
    const bool partial = key0 + S::kBlockN > w.k_len;
    const bool diagonal = a.causal && key0 + S::kBlockN - 1 > first_row + w.k_len - w.q_len;
    if (partial || diagonal) mask_tile(sc, a, w, row, key0);
    uint32_t p[8][4];
    softmax_tile(sc, o, st, a.scale_log2, p);
    device::mbarrier_wait(&s.v_full[stage], parity);
    accumulate_tile(o, p, device::smem_addr(s.v[stage]));
    device::mbarrier_arrive(&s.v_empty[stage]);
  }
  store_rows(o, st, a, w, row);
}

}  // namespace pagedattn::kernels::attention::v3
