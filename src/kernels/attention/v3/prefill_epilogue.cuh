// The end of a v3 prefill work tile for one consumer warpgroup: O normalised by the row sums and
// stored as bf16 with the LSE (natural log), rows past the request's queries left alone.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/mma.cuh"
#include "kernels/attention/v3/prefill_shape.cuh"
#include "kernels/attention/v3/prefill_softmax.cuh"
#include "kernels/attention/v3/prefill_tiles.cuh"

namespace pagedattn::kernels::attention::v3 {

// Normalises and stores this thread's two rows (row and row + 8) when they belong to the request.
template <int kChunks, int kRegs>
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

}  // namespace pagedattn::kernels::attention::v3
