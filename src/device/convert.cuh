// Register-level conversions: float pairs to packed f16/bf16 (low half = first value, as mma
// fragments need), packed 16-bit to floats, and a 16-bit type's traits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace pagedattn::device {

template <typename T>
struct Half2Of;
template <>
struct Half2Of<__half> {
  using Type = __half2;
};
template <>
struct Half2Of<__nv_bfloat16> {
  using Type = __nv_bfloat162;
};

// Packs (lo, hi) rounded to nearest even; lo lands in bits 0-15.
template <typename T>
__device__ __forceinline__ uint32_t pack_float2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <typename T>
__device__ __forceinline__ float2 unpack_float2(uint32_t bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&bits));
  } else {
    return __half22float2(*reinterpret_cast<__half2*>(&bits));
  }
}

// 2^x with one MUFU.EX2 (flush-to-zero; ex2(-inf) = +0). Softmax exponents are <= 0, where the
// approximation's relative error is about 2^-22.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace pagedattn::device
