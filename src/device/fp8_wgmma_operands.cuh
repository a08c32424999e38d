// Building FP8 (e4m3) wgmma operands on sm_90: f32 values packed four to a register with the
// hardware's saturating round-to-nearest-even conversion, and the 4 x 4 byte transpose that turns
// four rows of four FP8 values into four columns (the producer's V -> Vᵀ copy), and stmatrix.
#pragma once

#include <cstdint>

namespace pagedattn::device {

// Four floats as e4m3 bytes, x0 in bits 0-7 .. x3 in bits 24-31; out-of-range values saturate to
// +-448 (cvt.rn.satfinite, NaN stays NaN).
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  // The first source operand goes to the upper byte.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// The byte selectors of transpose_bytes_4x4 for a rotation `rot` (0..3), computed once.
struct ByteTransposeSelectors {
  uint32_t lo, hi;
};
__device__ __forceinline__ ByteTransposeSelectors byte_transpose_selectors(uint32_t rot) {
  // Interleaves byte r of the first word with byte r of the second, for r = rot, rot + 1 (lo) and
  // rot + 2, rot + 3 (hi), mod 4.
  auto pair = [](uint32_t r0, uint32_t r1) {
    return r0 | (r0 + 4) << 4 | r1 << 8 | (r1 + 4) << 12;
  };
  return {pair(rot, (rot + 1) & 3), pair((rot + 2) & 3, (rot + 3) & 3)};
}

// w[k] holds row k (byte b = element (k, b)); o[i] becomes column (i + rot) % 4 (byte k = element
// (k, (i + rot) % 4)). Eight byte permutes; the rotation is free, and lets neighbouring lanes
// store their columns to different bank groups.
__device__ __forceinline__ void transpose_bytes_4x4(const uint32_t (&w)[4],
                                                    ByteTransposeSelectors sel, uint32_t (&o)[4]) {
  const uint32_t t0 = __byte_perm(w[0], w[1], sel.lo), t1 = __byte_perm(w[0], w[1], sel.hi);
  const uint32_t t2 = __byte_perm(w[2], w[3], sel.lo), t3 = __byte_perm(w[2], w[3], sel.hi);
  o[0] = __byte_perm(t0, t2, 0x5410);
  o[1] = __byte_perm(t0, t2, 0x7632);
  o[2] = __byte_perm(t1, t3, 0x5410);
  o[3] = __byte_perm(t1, t3, 0x7632);
}

// Stores four 8x8 b16 matrices (sm_90): lanes 8i..8i+7 give the row addresses of matrix i (16
// contiguous bytes each), and r[i] of lane l is matrix i's row l / 4, bytes 4 (l % 4)..+3: the
// layout ldmatrix loads.
__device__ __forceinline__ void stmatrix_x4(const uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

}  // namespace pagedattn::device
