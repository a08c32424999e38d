// The CPU kernel's element widening (backends/cpu/kv_widen-inl.h, run through cpu::widen_row) on
// every SIMD target this machine has, against the reference codecs of common/numeric.h on every
// f16, e4m3 and e5m2 code; the softmax's exponential; and the output rounding
// (backends/cpu/output_store-inl.h, through cpu::store_output_row).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/simd_target.h"
#include "common/numeric.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu {
namespace {

// Same value, or both NaN (the NaN payloads may differ).
void expect_same(float got, float want, uint32_t code, const std::string& target) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << target << " code " << code;
  } else {
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << target << " code " << code << ": " << got << " vs " << want;
  }
}

class CpuConvert : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(force_simd_target(GetParam()).ok()); }
  void TearDown() override { ASSERT_TRUE(force_simd_target("best").ok()); }
};

TEST_P(CpuConvert, F16EveryCode) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> got(65536);
  widen_row(codes.data(), DType::kF16, 0, 65536, 1.0f, got.data());
  for (uint32_t c = 0; c < 65536; ++c) {
    expect_same(got[c], f16_bits_to_float(static_cast<uint16_t>(c)), c, GetParam());
  }
}

TEST_P(CpuConvert, Bf16EveryCode) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> got(65536);
  widen_row(codes.data(), DType::kBF16, 0, 65536, 1.0f, got.data());
  for (uint32_t c = 0; c < 65536; ++c) {
    expect_same(got[c], bf16_bits_to_float(static_cast<uint16_t>(c)), c, GetParam());
  }
}

TEST_P(CpuConvert, Fp8EveryCodeAndScale) {
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (float scale : {1.0f, 0.37f}) {
    float e4m3[256], e5m2[256];
    widen_row(codes, DType::kFP8E4M3, 0, 256, scale, e4m3);
    widen_row(codes, DType::kFP8E5M2, 0, 256, scale, e5m2);
    for (uint32_t c = 0; c < 256; ++c) {
      expect_same(e4m3[c], fp8_e4m3_to_float(static_cast<uint8_t>(c)) * scale, c, GetParam());
      expect_same(e5m2[c], fp8_e5m2_to_float(static_cast<uint8_t>(c)) * scale, c, GetParam());
    }
  }
}

TEST_P(CpuConvert, OffsetsAreElements) {
  const float values[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  float got[8];
  widen_row(values, DType::kF32, 8, 8, 1.0f, got);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], values[8 + i]);
}

// The softmax's exponential (exp_nonpositive): within 2 ulp of e^x down to about 2^-125, then 0
// (never a subnormal), 0 at -inf, 1 at 0, NaN kept; x from 0 down past the cut, 4096 points per 1.
TEST_P(CpuConvert, SoftmaxExpWithinTwoUlp) {
  std::vector<float> x;
  for (int i = 0; i <= 4 * 1024 * 110; ++i) x.push_back(-static_cast<float>(i) / 4096.0f);
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(-1e30f);
  const int n = static_cast<int>(x.size());
  std::vector<float> y(n);
  exp_row(x.data(), n, y.data());
  int far = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << GetParam();
      continue;
    }
    const double want = std::exp(static_cast<double>(x[i]));
    if (want < std::ldexp(1.0, -126)) {  // never a subnormal
      EXPECT_EQ(y[i], 0.0f) << GetParam() << " x " << x[i];
      continue;
    }
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    const bool cut = want < std::ldexp(1.0, -124) && y[i] == 0.0f;  // the cut's neighbourhood
    if (!cut && std::abs(y[i] - want) > 2 * ulp && ++far <= 5) {
      ADD_FAILURE() << GetParam() << " x " << x[i] << ": " << y[i] << " vs " << want;
    }
  }
  EXPECT_EQ(y[0], 1.0f);
}

TEST_P(CpuConvert, OutputRowsRoundLikeTheReferenceEncoders) {
  // Every f16 value, its neighbours halfway between codes, and the specials, times 1.5.
  std::vector<float> values;
  for (uint32_t c = 0; c < 65536; c += 7) {
    const float x = f16_bits_to_float(static_cast<uint16_t>(c));
    values.push_back(x);
    values.push_back(std::nextafter(x, 0.0f));
  }
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(std::bit_cast<float>(0x7F800001u));  // a signalling NaN, payload in the low bits
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(1e-40f);  // a float subnormal
  values.push_back(-3.0f);   // n not a multiple of any vector: a tail
  const int n = static_cast<int>(values.size());
  std::vector<uint16_t> bf16(n), f16(n);
  std::vector<float> f32(n + 3);
  store_output_row(values.data(), n, 1.5f, DType::kBF16, bf16.data(), 0);
  store_output_row(values.data(), n, 1.5f, DType::kF16, f16.data(), 0);
  store_output_row(values.data(), n, 1.5f, DType::kF32, f32.data(), 3);
  for (int i = 0; i < n; ++i) {
    const float x = values[i] * 1.5f;
    if (std::isnan(x)) {
      EXPECT_EQ(bf16[i], float_to_bf16_bits(x)) << GetParam() << " NaN " << i;
      EXPECT_TRUE(std::isnan(f16_bits_to_float(f16[i])));
      EXPECT_TRUE(std::isnan(f32[3 + i]));
      continue;
    }
    EXPECT_EQ(bf16[i], float_to_bf16_bits(x)) << GetParam() << " " << x;
    EXPECT_EQ(f16[i], float_to_f16_bits(x)) << GetParam() << " " << x;
    EXPECT_EQ(f32[3 + i], x) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, CpuConvert, ::testing::ValuesIn(simd_targets_available()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(CpuSimdTarget, ForcingNamesTheChoicesAndChangesNothingOnError) {
  const std::string before = simd_target();
  const Status s = force_simd_target("avx9000");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("choices: best, generic"), std::string::npos) << s.message();
  EXPECT_EQ(simd_target(), before);
  ASSERT_TRUE(force_simd_target("generic").ok());
  EXPECT_EQ(simd_target(), simd_targets_available().back());
  ASSERT_TRUE(force_simd_target("best").ok());
  EXPECT_EQ(simd_target(), simd_targets_available().front());
}

}  // namespace
}  // namespace pagedattn::cpu
