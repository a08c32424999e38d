// 2^x on the FMA and integer pipes. The FP8 attention softmax computes one exponential per score
// and issues more of them per tensor-core cycle than the multi-function unit (ex2.approx, 16 per
// SM per cycle) keeps up with; computing a share of them here balances the two pipes.
#pragma once

namespace pagedattn::device {

// x = n + f with |f| <= 1/2 (adding 1.5 * 2^23 rounds to the nearest integer, which lands in the
// low mantissa bits), 2^f by a degree-2 fit on [-1/2, 1/2] (relative error below 2.8e-3: for
// values rounded to e4m3 next, whose step is 2^-3), 2^n added to the exponent field. x is clamped
// to -125 (2^-125, zero once in e4m3; -inf gives it too); meant for x <= 127.
__device__ __forceinline__ float exp2_fma(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  x = fmaxf(x, -125.0f);
  const float shifted = x + kRound;
  const float f = x - (shifted - kRound);
  const float p = fmaf(fmaf(0.23734859f, f, 0.70128410f), f, 1.00035191f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(shifted) << 23));
}

}  // namespace pagedattn::device
