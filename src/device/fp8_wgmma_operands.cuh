// Building FP8 (e4m3) wgmma operands on sm_90: f32 values packed four to a register with the
// hardware's saturating round-to-nearest-even conversion.
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

}  // namespace pagedattn::device
