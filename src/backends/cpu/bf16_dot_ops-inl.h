// The AVX-512 BF16 operations of the bf16 dot-product decode kernel (decode_bf16_dot-inl.h), for
// Highway's AVX3_DL target only: Highway 1.0.3 has no target with AVX512_BF16, so these functions
// add it by attribute and run only where the CPU reports it (cpu_has_bf16_dot). vdpbf16ps
// multiplies pairs of bf16 exactly and adds both products to a float lane: twice the products of
// a float multiply-add per instruction, and no widening. FP8 codes become bf16 exactly through
// two 128-byte tables (vpermt2b, from AVX3_DL's VBMI), high and low byte of each code's bf16.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_BF16_DOT_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_BF16_DOT_OPS_INL_H_
#undef PAGEDATTN_CPU_BF16_DOT_OPS_INL_H_
#else
#define PAGEDATTN_CPU_BF16_DOT_OPS_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>

#include "pagedattn/types.h"

// Functions that use vdpbf16ps or call those that do: the target's features and AVX512_BF16 (clang
// takes a function's target attribute instead of the enclosing pragma's, so it names both).
#define PAGEDATTN_BF16_DOT __attribute__((target(HWY_TARGET_STR ",avx512bf16")))

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

inline bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

// bf16 bits of the FP8 code with magnitude bits `code` (sign clear): exact, subnormals
// normalised, e4m3's NaN and e5m2's infinities and NaNs kept.
constexpr uint16_t fp8_magnitude_to_bf16(DType type, int code) {
  const bool e4m3 = type == DType::kFP8E4M3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int exponent = code >> mantissa_bits, mantissa = code & ((1 << mantissa_bits) - 1);
  const int bias = e4m3 ? 7 : 15;
  if (e4m3 && code == 0x7F) return 0x7FC0;
  if (!e4m3 && exponent == 31) return mantissa == 0 ? 0x7F80 : 0x7FC0;
  // value = significand * 2^(power - mantissa_bits), with at most 4 significant bits.
  const int significand = exponent == 0 ? mantissa : (1 << mantissa_bits) | mantissa;
  const int power = (exponent == 0 ? 1 : exponent) - bias - mantissa_bits;
  float value = static_cast<float>(significand);
  for (int p = 0; p < power; ++p) value *= 2.0f;
  for (int p = 0; p > power; --p) value *= 0.5f;
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(value) >> 16);
}

// The high (byte 1) or low (byte 0) bytes of fp8_magnitude_to_bf16 for codes 0..127.
template <DType kType, int kByte>
constexpr std::array<uint8_t, 128> fp8_bf16_byte_table() {
  std::array<uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c)
    t[c] = static_cast<uint8_t>(fp8_magnitude_to_bf16(kType, c) >> (8 * kByte));
  return t;
}

// The tables of one FP8 type in registers.
struct Fp8Tables {
  __m512i high0, high1, low0, low1;  // codes 0..63 and 64..127
};

template <DType kType>
HWY_INLINE Fp8Tables fp8_tables() {
  alignas(64) static constexpr std::array<uint8_t, 128> kHigh = fp8_bf16_byte_table<kType, 1>();
  alignas(64) static constexpr std::array<uint8_t, 128> kLow = fp8_bf16_byte_table<kType, 0>();
  return {_mm512_load_si512(kHigh.data()), _mm512_load_si512(kHigh.data() + 64),
          _mm512_load_si512(kLow.data()), _mm512_load_si512(kLow.data() + 64)};
}

// The bf16 values of 64 FP8 codes as two vectors of 32: within each 128-bit block b, `first`
// holds codes 16b..16b+7 and `second` codes 16b+8..16b+15 (in-block byte interleaves).
HWY_INLINE void fp8_to_bf16(const Fp8Tables& t, __m512i codes, __m512i& first, __m512i& second) {
  __m512i high = _mm512_permutex2var_epi8(t.high0, codes, t.high1);
  const __m512i low = _mm512_permutex2var_epi8(t.low0, codes, t.low1);
  high = _mm512_ternarylogic_epi32(high, codes, _mm512_set1_epi8(static_cast<char>(0x80)),
                                   0xF8);  // high | (codes & 0x80): the sign
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

// acc + a[2l] * b[2l] + a[2l + 1] * b[2l + 1] in lane l, a and b 32 bf16 each.
PAGEDATTN_BF16_DOT HWY_INLINE __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// 32 floats as bf16, rounded to nearest even: lo's 16 then hi's 16.
PAGEDATTN_BF16_DOT HWY_INLINE __m512i to_bf16(__m512 lo, __m512 hi) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // per-target include guard
