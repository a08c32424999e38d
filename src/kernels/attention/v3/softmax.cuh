// The register math of a v3 prefill consumer between its two products, after the scores
// (v3/score_mask.cuh): the online softmax of one S tile, the rescale of O and P's packing as wgmma
// A fragments.
//
// Each thread holds two rows (g and g + 8 of its warp's 16) and, per row, a quarter of the
// columns of S (kBlockN / 4) and of O (D / 4): element 4j + 2h + e of an accumulator is row h,
// column 8j + 2t + e (wgmma.cuh). A row's four threads are the lanes of one quad, so row maxima
// take two shuffles.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/convert.cuh"
#include "device/mma.cuh"
#include "kernels/attention/v3/traits.cuh"

namespace pagedattn::kernels::attention::v3 {

struct RowState {
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
};

// The largest of `init` and this thread's scores of row h (S elements 4j + 2h and 4j + 2h + 1).
template <int kRegs>
__device__ __forceinline__ float thread_row_max(const float (&s)[kRegs], int h, float init) {
  float mx = init;
#pragma unroll
  for (int j = 0; j < kRegs / 4; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
  return mx;
}

// The maximum over a row's quad: the four lanes that hold its columns.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Online softmax over the tile, in place: S becomes P, the sums and maxima advance, and alpha is
// the factor O must be rescaled by (done by the caller once no P·V group is running). A row's
// maximum moves only when the tile's exceeds it by more than `threshold` (log2 units): below that
// the old one stays, P is at most 2^threshold (exact in f32, as precise in bf16) and alpha is 1.
// Returns whether a maximum of this thread's rows moved (else O needs no rescale).
template <int kRegs>
__device__ __forceinline__ bool softmax_tile(float (&s)[kRegs], RowState& st, float scale_log2,
                                             float threshold, float (&alpha)[2]) {
  bool grew = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mx = quad_max(thread_row_max(s, h, st.m[h]));
    // -inf - -inf is NaN: no visible key yet, nothing moves.
    const bool moves = (mx - st.m[h]) * scale_log2 > threshold;
    const float m = moves ? mx : st.m[h];
    const float offset = m == -INFINITY ? 0.0f : m * scale_log2;  // no visible key yet: no NaN
    // Exactly 1 when the maximum stands, so that skipping the rescale leaves O and l consistent.
    alpha[h] = moves ? device::fast_exp2(st.m[h] * scale_log2 - offset) : 1.0f;
    grew = grew || moves;
    st.m[h] = m;
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
  return grew;
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

}  // namespace pagedattn::kernels::attention::v3
