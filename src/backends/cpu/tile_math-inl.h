// The per-tile arithmetic shared by the prefill and decode kernels: lane sums of dot products,
// the score modifiers and the online softmax.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_TILE_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_TILE_MATH_INL_H_
#undef PAGEDATTN_CPU_TILE_MATH_INL_H_
#else
#define PAGEDATTN_CPU_TILE_MATH_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/attention_kernel_internal.h"
#include "common/mask.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The sum of each vector's lanes, stored to out[0..3]: pairs of vectors interleaved and added
// within 128-bit blocks, then the blocks added, instead of four separate reductions.
template <class DF, class V>
HWY_INLINE void store_lane_sums(DF df, V a, V b, V c, V d, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(a), out[1] = hn::GetLane(b), out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(d);
#else
  const auto ab = hn::Add(hn::InterleaveLower(a, b), hn::InterleaveUpper(df, a, b));
  const auto cd = hn::Add(hn::InterleaveLower(c, d), hn::InterleaveUpper(df, c, d));
  const hn::Repartition<uint64_t, DF> d64;
  const auto ab64 = hn::BitCast(d64, ab), cd64 = hn::BitCast(d64, cd);
  auto sums = hn::Add(hn::BitCast(df, hn::InterleaveLower(ab64, cd64)),
                      hn::BitCast(df, hn::InterleaveUpper(d64, ab64, cd64)));
  if constexpr (hn::MaxLanes(DF()) > 4) {
    const hn::Half<DF> dh;
    const auto half = hn::Add(hn::LowerHalf(dh, sums), hn::UpperHalf(dh, sums));
    if constexpr (hn::MaxLanes(DF()) > 8) {
      const hn::Half<decltype(dh)> dq;
      hn::StoreU(hn::Add(hn::LowerHalf(dq, half), hn::UpperHalf(dq, half)), dq, out);
    } else {
      hn::StoreU(half, dh, out);
    }
  } else {
    hn::StoreU(sums, df, out);
  }
#endif
}

// e^x for x <= 0 or -inf (a score less its row's max: every softmax exponent), within 2 ulp;
// 0 (never a subnormal) once 2^n of e^x = 2^n e^r falls below 2^-125 (x < -86.3), as at -inf.
// Highway's Exp also serves x > 0, at about 24 operations to these 18: the softmax's largest cost
// beside the dot products.
template <class DF, class V>
HWY_INLINE V exp_nonpositive(DF df, V x) {
  const hn::RebindToSigned<DF> di;
  // 1.5 * 2^23: x * log2(e) plus this rounds to an integer held in the low mantissa bits.
  const V round_bias = hn::Set(df, 12582912.0f);
  x = hn::Max(x, hn::Set(df, -104.0f));
  const V t = hn::MulAdd(x, hn::Set(df, 1.44269504088896341f), round_bias);
  const V n = hn::Sub(t, round_bias);
  V r = hn::MulAdd(n, hn::Set(df, -0.693145751953125f), x);  // x - n ln 2, in two parts
  r = hn::MulAdd(n, hn::Set(df, -1.428606765330187045e-6f), r);
  // e^r on [-ln2 / 2, ln2 / 2] as 1 + r + r^2 P(r), Cephes' expf polynomial.
  V p = hn::Set(df, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(df, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(df, 5.0000001201e-1f));
  const V y = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(df, 1.0f));
  // 2^n: n + 127 into the exponent field, from t's low bits; 0 where it would be subnormal.
  const auto biased = hn::Sub(hn::BitCast(di, t), hn::Set(di, 0x4B400000 - 127));
  const auto power = hn::IfThenZeroElse(hn::Lt(biased, hn::Set(di, 2)), hn::ShiftLeft<23>(biased));
  return hn::Mul(y, hn::BitCast(df, power));
}

// exp_nonpositive, except that NaN stays NaN: a NaN in the data must reach the output.
template <class DF, class V>
HWY_INLINE V exp_keeping_nan(DF df, V x) {
  const auto nan = hn::IsNaN(x);
  return hn::IfThenElse(nan, x, exp_nonpositive(df, hn::IfThenZeroElse(nan, x)));
}

// exp_keeping_nan over a row (cpu::exp_row): the softmax's exponential, for the tests.
inline void ExpRow(const float* HWY_RESTRICT x, int n, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  int i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(exp_keeping_nan(df, hn::LoadU(df, x + i)), df, y + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) hn::StoreU(exp_keeping_nan(d1, hn::LoadU(d1, x + i)), d1, y + i);
}

// Soft cap and ALiBi on one query vector's raw scores s[lo, hi) of a tile (ALiBi after the scale,
// as the math has it); returns the scale softmax_tile must still apply.
inline float apply_score_mods(const AttentionPass& pass, int head, int64_t pos, int64_t key0,
                              int lo, int hi, float* HWY_RESTRICT s) {
  const bool cap = mask::soft_cap_applies(pass.soft_cap);
  if (!cap && pass.alibi_slopes == nullptr) return pass.scale;
  if (cap) {
    const mask::SoftCap<float> soft_cap = mask::make_soft_cap(pass.scale, pass.soft_cap, 1.0f);
    for (int k = lo; k < hi; ++k) s[k] = mask::soft_capped(soft_cap, s[k]);
  } else {
    for (int k = lo; k < hi; ++k) s[k] *= pass.scale;
  }
  if (pass.alibi_slopes != nullptr) {
    const float slope = pass.alibi_slopes[head];
    for (int k = lo; k < hi; ++k) s[k] -= mask::alibi_bias(slope, pos, key0 + k);
  }
  return 1.0f;
}

// Online softmax of one query vector over one tile: turns its scores s[0, kTile) times `scale`
// into weights (0 outside the visible keys [lo, hi)), updates its running max m and denominator l,
// and returns the factor its accumulated output must be scaled by.
template <int kTile, class DF>
HWY_INLINE float softmax_tile(DF df, float scale, int lo, int hi, float* HWY_RESTRICT s, float& m,
                              float& l) {
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto vscale = hn::Set(df, scale);
  const auto vlo = hn::Set(df, static_cast<float>(lo));
  const auto vhi = hn::Set(df, static_cast<float>(hi));
  auto max_lanes = hn::Set(df, kNegInf);
  auto min_lanes = hn::Set(df, std::numeric_limits<float>::infinity());
  auto nan_lanes = hn::Lt(max_lanes, max_lanes);  // all false
  for (int k = 0; k < kTile; k += lanes) {
    const auto index = hn::Iota(df, static_cast<float>(k));
    const auto visible = hn::And(hn::Ge(index, vlo), hn::Lt(index, vhi));
    const auto v =
        hn::IfThenElse(visible, hn::Mul(hn::LoadU(df, s + k), vscale), hn::Set(df, kNegInf));
    hn::StoreU(v, df, s + k);
    max_lanes = hn::Max(max_lanes, v);
    min_lanes = hn::Min(min_lanes, v);
    nan_lanes = hn::Or(nan_lanes, hn::IsNaN(v));
  }
  // A NaN score makes the max NaN, and with it every weight and the output (Max drops NaN).
  const float tile_max = hn::AllFalse(df, nan_lanes) ? hn::GetLane(hn::MaxOfLanes(df, max_lanes))
                                                     : std::numeric_limits<float>::quiet_NaN();
  const float m_new = std::isnan(tile_max) || tile_max > m ? tile_max : m;
  if (m_new == kNegInf) {  // nothing visible yet: no weight, nothing to rescale
    for (int k = 0; k < kTile; k += lanes) hn::StoreU(hn::Zero(df), df, s + k);
    return 1.0f;
  }
  auto sum_lanes = hn::Zero(df);
  const auto m_lanes = hn::Set(df, m_new);
  if (hn::AllFalse(df, nan_lanes) && hn::GetLane(hn::MinOfLanes(df, min_lanes)) > kNegInf) {
    // Every key visible and every score finite (most tiles): no NaN or -inf rule to apply.
    for (int k = 0; k < kTile; k += lanes) {
      const auto w = exp_nonpositive(df, hn::Sub(hn::LoadU(df, s + k), m_lanes));
      hn::StoreU(w, df, s + k);
      sum_lanes = hn::Add(sum_lanes, w);
    }
  } else {
    for (int k = 0; k < kTile; k += lanes) {
      const auto w = exp_keeping_nan(df, hn::Sub(hn::LoadU(df, s + k), m_lanes));
      hn::StoreU(w, df, s + k);
      sum_lanes = hn::Add(sum_lanes, w);
    }
  }
  const float correction = m == m_new ? 1.0f : (m == kNegInf ? 0.0f : std::exp(m - m_new));

  l = l * correction + hn::GetLane(hn::SumOfLanes(df, sum_lanes));
  m = m_new;
  return correction;
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
