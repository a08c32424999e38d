// The second product's operands in the v3 FP8 prefill kernel, and why they need no register
// shuffles.
//
// P·V takes P from registers as the 8-bit A fragment: a thread's register r of k32 step kk holds
// row g (r even) or g + 8 (r odd) at the k positions 4t..4t+3 (r < 2) or 16 + 4t.. (r >= 2). The
// scores arrive in the f32 accumulator layout: the same rows, keys 8j + 2t and 8j + 2t + 1 of each
// n8 block j. So pack_p_fp8 packs, for each 16 keys, the thread's keys 2t, 2t + 1, 8 + 2t, 9 + 2t
// into the register at positions 4t..4t+3: position q of every 16 holds key
// perm(q) = 8 * ((q % 4) / 2) + 2 * (q / 4) + q % 2. The pre-pass writes Vᵀ with the same
// permutation of its keys (v3/fp8/v_transpose.h), so the positions pair up and the product is P·V.
#pragma once

#include <cstdint>

#include "device/fp8_wgmma_operands.cuh"

namespace pagedattn::kernels::attention::v3 {

// P (kBlockN keys of the thread's two rows, accumulator layout) as e4m3 A fragments.
template <int kSteps>
__device__ __forceinline__ void pack_p_fp8(const float (&s)[16 * kSteps],
                                           uint32_t (&p)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const float* x = s + 16 * kk;  // n8 blocks 4kk .. 4kk + 3
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int h = r % 2, block = 2 * (r / 2);  // row g + 8h; keys 16 * (r / 2) ..
      p[kk][r] = device::pack_e4m3x4(x[4 * block + 2 * h], x[4 * block + 2 * h + 1],
                                     x[4 * (block + 1) + 2 * h], x[4 * (block + 1) + 2 * h + 1]);
    }
  }
}

}  // namespace pagedattn::kernels::attention::v3
