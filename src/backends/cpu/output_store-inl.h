// Storing the kernel's float results in the output's dtype (f32, bf16 or f16), rounded to
// nearest even, NaN kept: the last step of every task (cpu::store_output_row runs it elsewhere).

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_OUTPUT_STORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_OUTPUT_STORE_INL_H_
#undef PAGEDATTN_CPU_OUTPUT_STORE_INL_H_
#else
#define PAGEDATTN_CPU_OUTPUT_STORE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

#include "common/numeric.h"
#include "pagedattn/types.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The bf16 bits of finite w rounded to nearest even, in the low half of 32-bit lanes.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> finite_bf16_bits(DF df, hn::Vec<DF> w) {
  const hn::RebindToSigned<DF> di32;
  const auto bits = hn::BitCast(di32, w);
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(di32, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(di32, 0x7FFF)), odd));
  return hn::And(rounded, hn::Set(di32, 0xFFFF));
}

// The same for any w: NaN stays NaN, quiet (as float_to_bf16_bits has it).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> bf16_bits(DF df, hn::Vec<DF> w) {
  const hn::RebindToSigned<DF> di32;
  const auto high = hn::ShiftRight<16>(hn::BitCast(di32, w));
  const auto nan_bits = hn::And(hn::Or(high, hn::Set(di32, 0x40)), hn::Set(di32, 0xFFFF));
  return hn::IfThenElse(hn::RebindMask(di32, hn::IsNaN(w)), nan_bits, finite_bf16_bits(df, w));
}

// dst[offset + d] = src[d] * multiplier for d in [0, n) in `dtype`. f16 goes through the
// reference encoder: Highway's conversion truncates on targets without F16C.
inline void StoreOutputRow(const float* HWY_RESTRICT src, int n, float multiplier, DType dtype,
                           void* dst, int64_t offset) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto vm = hn::Set(df, multiplier);
  int d = 0;
  if (dtype == DType::kF32) {
    float* out = static_cast<float*>(dst) + offset;
    for (; d + lanes <= n; d += lanes) hn::StoreU(hn::Mul(hn::LoadU(df, src + d), vm), df, out + d);
    for (; d < n; ++d) out[d] = src[d] * multiplier;
  } else if (dtype == DType::kBF16) {
    uint16_t* out = static_cast<uint16_t*>(dst) + offset;
    for (; d + lanes <= n; d += lanes) {
      const auto bits = bf16_bits(df, hn::Mul(hn::LoadU(df, src + d), vm));
      hn::StoreU(hn::DemoteTo(du16, bits), du16, out + d);
    }
    for (; d < n; ++d) out[d] = float_to_bf16_bits(src[d] * multiplier);
  } else {
    uint16_t* out = static_cast<uint16_t*>(dst) + offset;
    for (; d < n; ++d) out[d] = float_to_f16_bits(src[d] * multiplier);
  }
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
