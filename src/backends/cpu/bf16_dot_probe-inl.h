// The compute probe's micro-kernels: bf16 products accumulated in float, the precision of the
// attention kernel's dot products, two ways: through Highway's ReorderWidenMulAccumulate (which
// each target maps to its best bf16 multiply-add), and as the attention kernel does them, bf16
// widened to float once and then float multiply-adds. Rows of A are broadcast against vectors of B,
// so that kProbeRows x 2 (x 2) accumulators are in flight.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#undef PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#else
#define PAGEDATTN_CPU_BF16_DOT_PROBE_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstdint>
#include <vector>

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

float WidenedDotKernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops) {
  const hn::ScalableTag<float> df;
  using VF = hn::Vec<decltype(df)>;
  const int lanes = static_cast<int>(hn::Lanes(df));
  // The panels widened once, as the attention kernel widens a tile once for many queries.
  std::vector<float> aw(static_cast<size_t>(k) * kProbeRows);
  std::vector<float> bw(static_cast<size_t>(k) * 2 * lanes);
  for (size_t i = 0; i < aw.size(); ++i) aw[i] = std::bit_cast<float>(uint32_t{a[i]} << 16);
  for (size_t i = 0; i < bw.size(); ++i) bw[i] = std::bit_cast<float>(uint32_t{b[i]} << 16);
  VF sum[kProbeRows][2];
  for (int r = 0; r < kProbeRows; ++r) sum[r][0] = sum[r][1] = hn::Zero(df);
  for (int rep = 0; rep < repeats; ++rep) {
    for (int p = 0; p < k; ++p) {
      const VF b0 = hn::LoadU(df, bw.data() + (2 * p) * lanes);
      const VF b1 = hn::LoadU(df, bw.data() + (2 * p + 1) * lanes);
      for (int r = 0; r < kProbeRows; ++r) {
        const VF ar = hn::Set(df, aw[p * kProbeRows + r]);
        sum[r][0] = hn::MulAdd(ar, b0, sum[r][0]);
        sum[r][1] = hn::MulAdd(ar, b1, sum[r][1]);
      }
    }
  }
  VF total = hn::Zero(df);
  for (int r = 0; r < kProbeRows; ++r) total = hn::Add(total, hn::Add(sum[r][0], sum[r][1]));
  *flops = int64_t{2} * repeats * k * kProbeRows * 2 * lanes;
  return hn::GetLane(hn::SumOfLanes(df, total));
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
