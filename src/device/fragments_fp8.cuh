// FP8 operands of mma.sync taken straight from shared memory: ldmatrix moves FP8 bytes as if they
// were b16 pairs, then packed conversions (cvt.rn.f16x2.e4m3x2 / e5m2x2) build f16 fragments, so a
// K/V tile is converted once, in registers, with no shared-memory staging.
//
// K (B operand of S = Q K^T): ldmatrix (no .trans) of 8 key rows x 16 bytes gives lane l the
// bytes 4t..4t+3 of key g (t = l % 4, g = l / 4): one register is the (b0, b1) pair of a k16 step
// whose k order is permuted (byte 4t + j holds k 2t + j for j < 2, k 2t + 8 + j - 2 otherwise);
// the query fragment is loaded with the same permutation, so the dot products are unchanged.
//
// V (B operand of O = P V): ldmatrix.trans of 8 key rows x 16 bytes gives lane l the bytes
// (key 2t, col 2g), (key 2t, 2g + 1), (key 2t + 1, 2g), (key 2t + 1, 2g + 1); one byte permute
// splits them into the b0 operands of two MMAs, one for the even and one for the odd columns.
#pragma once

#include <cstdint>

#include "device/fp8.cuh"

namespace pagedattn::device {

// Two or one 8x8 b16 matrices (lanes 0-15, resp. 0-7, give the row addresses).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x1(uint32_t& r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// Four FP8 values (bytes 0-3) to two packed f16 pairs: lo = bytes 0-1, hi = bytes 2-3.
template <Fp8Format kFormat>
__device__ __forceinline__ void fp8x4_to_f16x2x2(uint32_t v, uint32_t& lo, uint32_t& hi) {
  lo = fp8x2_to_half2<__half, kFormat>(static_cast<uint16_t>(v & 0xFFFFu));
  hi = fp8x2_to_half2<__half, kFormat>(static_cast<uint16_t>(v >> 16));
}

// Bytes (a, b, c, d) -> (a, c, b, d): the trans-loaded V register regrouped by column.
__device__ __forceinline__ uint32_t fp8_pair_columns(uint32_t v) {
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, 0x3120;\n" : "=r"(r) : "r"(v));
  return r;
}

}  // namespace pagedattn::device
