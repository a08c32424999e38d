// The compute probe's micro-kernel: bf16 products accumulated in float, the precision of the
// attention kernel's dot products, through Highway's ReorderWidenMulAccumulate (which each target
// maps to its best bf16 multiply-add). Rows of A are broadcast against vectors of B, so that
// kProbeRows x 2 x 2 accumulators are in flight.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#undef PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#else
#define PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows of A per step: 4 x 2 x 2 accumulators fill 16 of AVX2's 16 registers less what the
// operands need, so it uses 3.
constexpr int kProbeRows =
    (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3) ? 3 : 4;

float Bf16DotKernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops) {
  const hn::ScalableTag<float> df;
#if HWY_TARGET == HWY_SCALAR
  const hn::Rebind<hwy::bfloat16_t, decltype(df)> dbf;  // one lane, one product per call
#else
  const hn::Repartition<hwy::bfloat16_t, decltype(df)> dbf;
#endif
  const hn::RebindToUnsigned<decltype(dbf)> du16;
  using VF = hn::Vec<decltype(df)>;
  const int pairs = static_cast<int>(hn::Lanes(dbf));  // bf16 products per call
  VF sum0[kProbeRows][2], sum1[kProbeRows][2];
  for (int r = 0; r < kProbeRows; ++r) {
    for (int c = 0; c < 2; ++c) sum0[r][c] = sum1[r][c] = hn::Zero(df);
  }
  for (int rep = 0; rep < repeats; ++rep) {
    for (int p = 0; p < k; ++p) {
      const auto b0 = hn::BitCast(dbf, hn::LoadU(du16, b + (2 * p) * pairs));
      const auto b1 = hn::BitCast(dbf, hn::LoadU(du16, b + (2 * p + 1) * pairs));
      for (int r = 0; r < kProbeRows; ++r) {
        const auto ar = hn::BitCast(dbf, hn::Set(du16, a[p * kProbeRows + r]));
        sum0[r][0] = hn::ReorderWidenMulAccumulate(df, ar, b0, sum0[r][0], sum1[r][0]);
        sum0[r][1] = hn::ReorderWidenMulAccumulate(df, ar, b1, sum0[r][1], sum1[r][1]);
      }
    }
  }
  VF total = hn::Zero(df);
  for (int r = 0; r < kProbeRows; ++r) {
    for (int c = 0; c < 2; ++c) total = hn::Add(total, hn::Add(sum0[r][c], sum1[r][c]));
  }
  *flops = int64_t{2} * repeats * k * kProbeRows * 2 * pairs;
  return hn::GetLane(hn::SumOfLanes(df, total));
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
