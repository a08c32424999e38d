// Elements of any CPU_ATTN dtype widened to float vectors in registers. FP8 goes through f16, which
// Highway widens with the hardware where it can: e5m2 is an f16's top byte; e4m3's exponent and
// mantissa, placed in f16's fields, are the value times 2^-8 (exactly, subnormals included), so
// callers fold 2^8 into the scale (kE4m3Unscale); e4m3's NaN code gets an f16 NaN.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_KV_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_KV_WIDEN_INL_H_
#undef PAGEDATTN_CPU_KV_WIDEN_INL_H_
#else
#define PAGEDATTN_CPU_KV_WIDEN_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#include "pagedattn/types.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// What widened e4m3 codes are multiplied by to become values.
constexpr float kE4m3Unscale = 256.0f;

// Highway 1.0.3 widens f16 in software on these targets and turns infinities and NaN into finite
// numbers; the others convert in hardware (F16C, AVX-512, NEON).
constexpr bool kF16InSoftware = HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 ||
                                HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128;

// f16 bits to float: exponent and mantissa shifted into float position and rebiased by 2^112
// (subnormals included); inf and NaN, whose rebias would be wrong, get the exponent all ones.
template <class DF, class VU16>
HWY_INLINE hn::Vec<DF> f16_bits_to_float(DF df, VU16 h) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const auto bits = hn::PromoteTo(du32, h);
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du32, 0x8000u)));
  const auto rest = hn::And(bits, hn::Set(du32, 0x7FFFu));
  const auto moved = hn::ShiftLeft<13>(rest);
  const auto scaled = hn::Mul(hn::BitCast(df, moved), hn::Set(df, 0x1p112f));
  const auto special = hn::RebindMask(df, hn::Gt(hn::BitCast(di32, rest), hn::Set(di32, 0x7BFF)));
  const auto inf_nan = hn::BitCast(df, hn::Or(moved, hn::Set(du32, 0x7F800000u)));
  return hn::Or(hn::IfThenElse(special, inf_nan, scaled), hn::BitCast(df, sign));
}

template <class DF, class VU16>
HWY_INLINE hn::Vec<DF> widen_f16_bits(DF df, VU16 h) {
  if constexpr (kF16InSoftware) {
    return f16_bits_to_float(df, h);
  } else {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::BitCast(df16, h));
  }
}

// Lanes(df) elements of type kType starting at element i of `row`, as floats (e4m3 still / 2^8).
template <DType kType, class DF>
HWY_INLINE hn::Vec<DF> widen(DF df, const void* row, int64_t i) {
  if constexpr (kType == DType::kF32) {
    return hn::LoadU(df, static_cast<const float*>(row) + i);
  } else if constexpr (kType == DType::kBF16) {  // a bf16 is a float's top half
    const hn::RebindToUnsigned<DF> du32;
    const hn::Rebind<uint16_t, DF> du16;
    const auto bits = hn::PromoteTo(du32, hn::LoadU(du16, static_cast<const uint16_t*>(row) + i));
    return hn::BitCast(df, hn::ShiftLeft<16>(bits));
  } else if constexpr (kType == DType::kF16) {
    const hn::Rebind<uint16_t, DF> du16;
    return widen_f16_bits(df, hn::LoadU(du16, static_cast<const uint16_t*>(row) + i));
  } else {
    const hn::Rebind<uint8_t, DF> du8;
    const hn::Rebind<uint16_t, DF> du16;
    auto h = hn::PromoteTo(du16, hn::LoadU(du8, static_cast<const uint8_t*>(row) + i));
    h = hn::ShiftLeft<8>(h);  // e5m2 is now an f16
    if constexpr (kType == DType::kFP8E4M3) {
      // An arithmetic shift by one copies the sign into f16's top exponent bit, which the mask
      // clears: sign, then exponent and mantissa one bit lower. e4m3's NaN code (all of exponent
      // and mantissa set) lands on 0x3F80 and is replaced by an f16 NaN.
      const hn::RebindToSigned<decltype(du16)> di16;
      h = hn::And(hn::BitCast(du16, hn::ShiftRight<1>(hn::BitCast(di16, h))),
                  hn::Set(du16, 0xBFFF));
      const auto nan = hn::Eq(hn::And(h, hn::Set(du16, 0x7FFF)), hn::Set(du16, 0x3F80));
      h = hn::IfThenElse(nan, hn::Set(du16, 0x7E00), h);
    }
    return widen_f16_bits(df, h);
  }
}

// dst[0, n) = row[offset, offset + n) * multiplier; n a multiple of Lanes(df).
template <DType kType, class DF>
HWY_INLINE void widen_scaled(DF df, const void* row, int64_t offset, int n, float multiplier,
                             float* HWY_RESTRICT dst) {
  const auto m = hn::Set(df, multiplier);
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int d = 0; d < n; d += lanes) {
    hn::StoreU(hn::Mul(widen<kType>(df, row, offset + d), m), df, dst + d);
  }
}

// 2 * Lanes(df) elements of type kType from element i of `row`, as two float vectors in registers.
// bf16 comes in as 32-bit pairs: v0 holds the even elements (a pair's low half shifted up), v1 the
// odd ones (the high half masked), two operations for two vectors; other types come in order.
// pair_position says where each element lands.
template <DType kType, class DF>
HWY_INLINE void widen_pair(DF df, const void* row, int64_t i, hn::Vec<DF>& v0, hn::Vec<DF>& v1) {
  if constexpr (kType == DType::kBF16 && HWY_TARGET != HWY_SCALAR) {
    const hn::RebindToUnsigned<DF> du32;
    const hn::Repartition<uint16_t, DF> du16;  // 2 * Lanes(df) lanes
    const auto pairs = hn::BitCast(du32, hn::LoadU(du16, static_cast<const uint16_t*>(row) + i));
    v0 = hn::BitCast(df, hn::ShiftLeft<16>(pairs));  // little-endian: the even element is low
    v1 = hn::BitCast(df, hn::And(pairs, hn::Set(du32, 0xFFFF0000u)));
  } else {
    v0 = widen<kType>(df, row, i);
    v1 = widen<kType>(df, row, i + static_cast<int64_t>(hn::Lanes(df)));
  }
}

// Where element j of a row lands when widen_pair reads it `lanes` floats per vector: each run of
// 2 * lanes elements becomes v0's lanes then v1's.
template <DType kType>
inline int pair_position(int lanes, int j) {
  if constexpr (kType != DType::kBF16) {
    return j;
  } else {
    const int r = j % (2 * lanes);
    return j - r + (r % 2) * lanes + r / 2;
  }
}

// The multiplier that turns widened codes of `dtype` into values with dequantization `scale`.
inline float widen_multiplier(DType dtype, float scale) {
  return dtype == DType::kFP8E4M3 ? scale * kE4m3Unscale : scale;
}

// Calls fn(std::integral_constant<DType, t>{}) for the runtime dtype t (unknown dtypes read as
// e4m3, like the rest of the backend's FP8 handling).
template <class Fn>
HWY_INLINE void with_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(std::integral_constant<DType, DType::kF32>{});
    case DType::kF16: return fn(std::integral_constant<DType, DType::kF16>{});
    case DType::kBF16: return fn(std::integral_constant<DType, DType::kBF16>{});
    case DType::kFP8E5M2: return fn(std::integral_constant<DType, DType::kFP8E5M2>{});
    default: return fn(std::integral_constant<DType, DType::kFP8E4M3>{});
  }
}

// The exported widening of one row (tests run it on every target).
inline void WidenRow(const void* src, DType dtype, int64_t offset, int n, float scale, float* dst) {
  const hn::CappedTag<float, 8> df;  // n is a multiple of 8
  with_dtype(dtype, [&](auto type) {
    widen_scaled<decltype(type)::value>(df, src, offset, n, widen_multiplier(dtype, scale), dst);
  });
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
