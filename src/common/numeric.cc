// Float <-> f16 / bf16 / FP8 conversions, written from the format definitions.
//
// Conventions (shared with the CUDA kernels, which use __NV_SATFINITE):
// - every encoder rounds to nearest, ties to even, subnormals included;
// - f16 and bf16 overflow to +-inf (IEEE); FP8 saturates: anything past the largest finite value,
//   +-inf included, becomes +-448 (e4m3) or +-57344 (e5m2);
// - NaN stays NaN: f16 0x7E00 and bf16 (payload top bits, quiet bit set) keep the sign; FP8 gives
//   0x7F in both formats whatever the sign, as CUDA's __nv_cvt_float_to_fp8 does.
#include "common/numeric.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace pagedattn {
namespace {

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;

// Rounds the finite magnitude with float32 bits `a` to a binary format with `mbits` mantissa bits
// and exponent bias `bias` (round to nearest even). Returns the magnitude code (exponent field,
// mantissa field), which may lie past the format's range; callers saturate or overflow it.
uint32_t round_magnitude(uint32_t a, int mbits, int bias) {
  const int min_normal_exp = 1 - bias;
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp >= min_normal_exp) {
    // Rounding the whole bit pattern lets a mantissa carry bump the exponent, as it should.
    const int shift = 23 - mbits;
    const uint32_t rounded = a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
    return (rounded >> shift) - (static_cast<uint32_t>(127 - bias) << mbits);
  }
  // Subnormal in the target: count quanta of 2^(min_normal_exp - mbits). The scaling is exact and
  // nearbyint rounds half to even in the default rounding mode. 2^mbits quanta is the smallest
  // normal code, which the same formula produces.
  const float quanta = std::ldexp(std::bit_cast<float>(a), mbits - min_normal_exp);
  return static_cast<uint32_t>(std::nearbyint(quanta));
}

uint8_t encode_fp8(float x, int mbits, int bias, uint32_t max_finite_code) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((f >> 24) & 0x80u);
  const uint32_t a = f & kF32AbsMask;
  if (a > kF32Inf) return 0x7F;                                           // NaN
  if (a == kF32Inf) return sign | static_cast<uint8_t>(max_finite_code);  // saturate
  uint32_t code = round_magnitude(a, mbits, bias);
  if (code > max_finite_code) code = max_finite_code;
  return sign | static_cast<uint8_t>(code);
}

}  // namespace

uint16_t float_to_f16_bits(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t a = f & kF32AbsMask;
  if (a > kF32Inf) return sign | 0x7E00;
  if (a == kF32Inf) return sign | 0x7C00;
  const uint32_t code = round_magnitude(a, 10, 15);
  return sign | static_cast<uint16_t>(code >= 0x7C00u ? 0x7C00u : code);
}

float f16_bits_to_float(uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exp = (bits >> 10) & 0x1F;
  const int mant = bits & 0x3FF;
  if (exp == 0x1F) return mant == 0 ? sign * INFINITY : std::copysign(NAN, sign);
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

uint16_t float_to_bf16_bits(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  if ((f & kF32AbsMask) > kF32Inf) return static_cast<uint16_t>((f >> 16) | 0x0040u);
  // Overflow past the largest finite bf16 rounds to inf, as IEEE rounding does.
  return static_cast<uint16_t>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

float bf16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// e4m3 ("fn"): bias 7, no infinities, S.1111.111 is NaN, largest finite S.1111.110 = 448.
uint8_t float_to_fp8_e4m3(float x) {
  return encode_fp8(x, 3, 7, 0x7E);
}

float fp8_e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exp = (bits >> 3) & 0xF;
  const int mant = bits & 0x7;
  if (exp == 0xF && mant == 0x7) return std::copysign(NAN, sign);
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(static_cast<float>(mant | 0x8), exp - 10);
}

// e5m2: IEEE-like, bias 15, S.11111.00 is inf, S.11111.xx NaN; largest finite S.11110.11 = 57344.
uint8_t float_to_fp8_e5m2(float x) {
  return encode_fp8(x, 2, 15, 0x7B);
}

float fp8_e5m2_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exp = (bits >> 2) & 0x1F;
  const int mant = bits & 0x3;
  if (exp == 0x1F) return mant == 0 ? sign * INFINITY : std::copysign(NAN, sign);
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -16);
  return sign * std::ldexp(static_cast<float>(mant | 0x4), exp - 17);
}

float load_as_float(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(data)[index];
    case DType::kF16: return f16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::kFP8E4M3: return fp8_e4m3_to_float(static_cast<const uint8_t*>(data)[index]);
    case DType::kFP8E5M2: return fp8_e5m2_to_float(static_cast<const uint8_t*>(data)[index]);
    case DType::kU8: return static_cast<float>(static_cast<const uint8_t*>(data)[index]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(data)[index]);
    case DType::kI64: return static_cast<float>(static_cast<const int64_t*>(data)[index]);
  }
  return NAN;
}

void store_from_float(void* data, DType dtype, int64_t index, float x) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[index] = x; return;
    case DType::kF16: static_cast<uint16_t*>(data)[index] = float_to_f16_bits(x); return;
    case DType::kBF16: static_cast<uint16_t*>(data)[index] = float_to_bf16_bits(x); return;
    case DType::kFP8E4M3: static_cast<uint8_t*>(data)[index] = float_to_fp8_e4m3(x); return;
    case DType::kFP8E5M2: static_cast<uint8_t*>(data)[index] = float_to_fp8_e5m2(x); return;
    case DType::kU8: static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(x); return;
    case DType::kI32: static_cast<int32_t*>(data)[index] = static_cast<int32_t>(x); return;
    case DType::kI64: static_cast<int64_t*>(data)[index] = static_cast<int64_t>(x); return;
  }
}

}  // namespace pagedattn
