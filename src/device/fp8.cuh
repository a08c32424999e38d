// FP8 (e4m3 "fn" and e5m2) encode/decode on the device, bit-exact with the host conversions of
// src/common/numeric.h: encoders round to nearest even, saturate to the largest finite value
// (infinities included) and give 0x7F for NaN whatever its sign (as __nv_cvt_float_to_fp8 does);
// decoders are exact.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace pagedattn::device {

enum class Fp8Format { kE4M3, kE5M2 };

// Magnitude code of a finite float's bits `a` for a format with kMbits mantissa bits and kBias.
template <int kMbits, int kBias>
__device__ __forceinline__ uint32_t fp8_round_magnitude(uint32_t a) {
  constexpr int kMinNormalExp = 1 - kBias;
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp >= kMinNormalExp) {
    constexpr int kShift = 23 - kMbits;
    const uint32_t rounded = a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u);
    return (rounded >> kShift) - (static_cast<uint32_t>(127 - kBias) << kMbits);
  }
  // Exact scaling into quanta of the subnormal step; rintf rounds half to even.
  const float quanta = __uint_as_float(a) * exp2f(static_cast<float>(kMbits - kMinNormalExp));
  return static_cast<uint32_t>(rintf(quanta));
}

template <Fp8Format kFormat>
__device__ __forceinline__ uint8_t float_to_fp8(float x) {
  constexpr int kMbits = kFormat == Fp8Format::kE4M3 ? 3 : 2;
  constexpr int kBias = kFormat == Fp8Format::kE4M3 ? 7 : 15;
  constexpr uint32_t kMaxFinite = kFormat == Fp8Format::kE4M3 ? 0x7Eu : 0x7Bu;
  const uint32_t f = __float_as_uint(x);
  const uint32_t sign = (f >> 24) & 0x80u;
  const uint32_t a = f & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7Fu;
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | kMaxFinite);
  uint32_t code = fp8_round_magnitude<kMbits, kBias>(a);
  if (code > kMaxFinite) code = kMaxFinite;
  return static_cast<uint8_t>(sign | code);
}

// Exact decode to float.
template <Fp8Format kFormat>
__device__ __forceinline__ float fp8_to_float(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  float mag;
  if constexpr (kFormat == Fp8Format::kE4M3) {
    const uint32_t exp = (bits >> 3) & 0xFu, mant = bits & 0x7u;
    if (exp == 0xF && mant == 0x7) return __uint_as_float(sign | 0x7FC00000u);
    mag = exp == 0 ? static_cast<float>(mant) * 0.001953125f  // 2^-9
                   : __uint_as_float(((exp + 120u) << 23) | (mant << 20));
  } else {
    const uint32_t exp = (bits >> 2) & 0x1Fu, mant = bits & 0x3u;
    if (exp == 0x1F) return __uint_as_float(sign | (mant == 0 ? 0x7F800000u : 0x7FC00000u));
    mag = exp == 0 ? static_cast<float>(mant) * 1.52587890625e-05f  // 2^-16
                   : __uint_as_float(((exp + 112u) << 23) | (mant << 21));
  }
  return __uint_as_float(sign | __float_as_uint(mag));
}

// Two FP8 values (bits 0-7 and 8-15 of `pair`) to a packed pair of T (low half = bits 0-7).
// Exact: every FP8 value is representable in f16 and bf16.
template <typename T, Fp8Format kFormat>
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint16_t pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h2;
  if constexpr (kFormat == Fp8Format::kE4M3) {
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
  } else {
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
  }
  if constexpr (std::is_same_v<T, __half>) {
    return h2;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<__half2*>(&h2));
    __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<uint32_t*>(&b);
  }
#else
  const float lo = fp8_to_float<kFormat>(static_cast<uint8_t>(pair & 0xFF));
  const float hi = fp8_to_float<kFormat>(static_cast<uint8_t>(pair >> 8));
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&b);
  }
#endif
}

}  // namespace pagedattn::device
