// f16 / bf16 / FP8 conversions against the format definitions: exhaustive decodes, round trips of
// every code, a brute-force nearest-even encoder, ties, subnormals, saturation and NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/numeric.h"

namespace pagedattn {
namespace {

// A format with `ebits` exponent bits, `mbits` mantissa bits and bias 2^(ebits-1) - 1, decoded the
// textbook way in double. `ieee_top`: the top exponent is inf/NaN (f16, e5m2); otherwise only the
// all-ones code is NaN (e4m3fn).
double decode_by_formula(uint32_t code, int ebits, int mbits, bool ieee_top) {
  const int bias = (1 << (ebits - 1)) - 1;
  const double sign = (code >> (ebits + mbits)) & 1 ? -1.0 : 1.0;
  const uint32_t e = (code >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = code & ((1u << mbits) - 1);
  const uint32_t e_max = (1u << ebits) - 1;
  if (ieee_top && e == e_max) return m == 0 ? sign * INFINITY : NAN;
  if (!ieee_top && e == e_max && m == (1u << mbits) - 1) return NAN;
  if (e == 0) return sign * std::pow(2.0, 1 - bias) * (m / std::pow(2.0, mbits));
  return sign * std::pow(2.0, static_cast<int>(e) - bias) * (1.0 + m / std::pow(2.0, mbits));
}

TEST(NumericTest, Fp8E4M3DecodesEveryCodeByTheFormula) {
  for (int c = 0; c < 256; ++c) {
    const double want = decode_by_formula(c, 4, 3, false);
    const float got = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(got, want) << "code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;
    }
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(NumericTest, Fp8E5M2DecodesEveryCodeByTheFormula) {
  for (int c = 0; c < 256; ++c) {
    const double want = decode_by_formula(c, 5, 2, true);
    const float got = fp8_e5m2_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(got, want) << "code " << c;
    }
  }
  EXPECT_EQ(fp8_e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7C), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
}

TEST(NumericTest, F16DecodesEveryCodeByTheFormula) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const double want = decode_by_formula(c, 5, 10, true);
    const float got = f16_bits_to_float(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << c;
    } else {
      ASSERT_EQ(got, want) << "code " << c;
    }
  }
}

TEST(NumericTest, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if (!std::isnan(fp8_e4m3_to_float(code))) {
      EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(code)), code) << c;
    }
    if (std::isfinite(fp8_e5m2_to_float(code))) {
      EXPECT_EQ(float_to_fp8_e5m2(fp8_e5m2_to_float(code)), code) << c;
    }
  }
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t code = static_cast<uint16_t>(c);
    if (!std::isnan(f16_bits_to_float(code))) {
      ASSERT_EQ(float_to_f16_bits(f16_bits_to_float(code)), code) << c;
    }
    if (!std::isnan(bf16_bits_to_float(code))) {
      ASSERT_EQ(float_to_bf16_bits(bf16_bits_to_float(code)), code) << c;
    }
  }
}

// Brute force: the finite code nearest to x, ties to the even code, saturating past the largest.
uint8_t nearest_even_fp8(float x, float (*decode)(uint8_t)) {
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = decode(static_cast<uint8_t>(c));
    if (!std::isfinite(v) || std::signbit(v) != std::signbit(x)) continue;
    const double err = std::fabs(static_cast<double>(v) - x);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(NumericTest, Fp8EncodeIsNearestEvenBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-22.0f, 18.0f);
  for (int i = 0; i < 20000; ++i) {
    const float magnitude = std::exp2(exponent(rng));
    const float x = (i & 1) ? -magnitude : magnitude;
    ASSERT_EQ(float_to_fp8_e4m3(x), nearest_even_fp8(x, fp8_e4m3_to_float)) << x;
    ASSERT_EQ(float_to_fp8_e5m2(x), nearest_even_fp8(x, fp8_e5m2_to_float)) << x;
  }
}

// Midpoints between neighbouring codes go to the even one; a hair either side goes to the nearer.
template <typename Encode, typename Decode>
void expect_ties_to_even(Encode encode, Decode decode, int num_codes, uint32_t last_finite) {
  for (uint32_t c = 0; c < last_finite; ++c) {
    const double lo = decode(c);
    const double hi = decode(c + 1);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint not exact in float";
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    ASSERT_EQ(encode(mid), even) << "tie between codes " << c << " and " << c + 1;
    ASSERT_EQ(encode(std::nextafter(mid, -INFINITY)), c) << c;
    ASSERT_EQ(encode(std::nextafter(mid, INFINITY)), c + 1) << c;
  }
}

TEST(NumericTest, TiesRoundToEven) {
  expect_ties_to_even([](float x) { return uint32_t{float_to_fp8_e4m3(x)}; },
                      [](uint32_t c) { return fp8_e4m3_to_float(static_cast<uint8_t>(c)); }, 256,
                      0x7D);
  expect_ties_to_even([](float x) { return uint32_t{float_to_fp8_e5m2(x)}; },
                      [](uint32_t c) { return fp8_e5m2_to_float(static_cast<uint8_t>(c)); }, 256,
                      0x7A);
  expect_ties_to_even([](float x) { return uint32_t{float_to_f16_bits(x)}; },
                      [](uint32_t c) { return f16_bits_to_float(static_cast<uint16_t>(c)); }, 65536,
                      0x7BFE);
  // bf16: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(float_to_bf16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
}

TEST(NumericTest, SubnormalsRoundCorrectly) {
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);   // tie with 0: even
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(3.0f, -11)), 0x01);   // 0.75 quantum
  EXPECT_EQ(float_to_fp8_e4m3(-std::ldexp(1.0f, -10)), 0x80);  // -0
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(7.5f, -9)), 0x08);    // tie: up to the smallest normal
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(3.0f, -17)), 0x02);  // 1.5 quanta: tie to even 2
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_f16_bits(1e-30f), 0x0000);
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(NumericTest, Fp8SaturatesAndF16Overflows) {
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7E);  // would round to 480, which does not exist
  EXPECT_EQ(float_to_fp8_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7B);  // the tie towards 65536 (inf) saturates
  EXPECT_EQ(float_to_fp8_e5m2(1e30f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2(INFINITY), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2(-INFINITY), 0xFB);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7C00);  // IEEE: the tie rounds to even, i.e. inf
  EXPECT_EQ(float_to_f16_bits(-INFINITY), 0xFC00);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
}

TEST(NumericTest, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float_to_fp8_e4m3(nan), 0x7F);
  EXPECT_EQ(float_to_fp8_e4m3(-nan), 0x7F);  // the canonical NaN, as CUDA's conversion gives
  EXPECT_EQ(float_to_fp8_e5m2(nan), 0x7F);
  EXPECT_EQ(float_to_fp8_e5m2(-nan), 0x7F);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(float_to_fp8_e5m2(-nan))));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(nan))));
  // A signalling NaN whose payload lives only in the low bits must not become inf.
  const float low_payload = std::bit_cast<float>(0x7F800001u);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(low_payload))));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(low_payload))));
}

TEST(NumericTest, LoadAndStoreEveryDtype) {
  alignas(8) unsigned char buffer[64] = {};
  // 1.625 = 1 + 5/8: exact down to e4m3; in e5m2 a tie between 1.5 and 1.75, so 1.5 (even).
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2}) {
    store_from_float(buffer, dtype, 3, 1.625f);
    EXPECT_EQ(load_as_float(buffer, dtype, 3), dtype == DType::kFP8E5M2 ? 1.5f : 1.625f)
        << dtype_name(dtype);
  }
  store_from_float(buffer, DType::kI32, 1, -7.0f);
  EXPECT_EQ(load_as_float(buffer, DType::kI32, 1), -7.0f);
}

}  // namespace
}  // namespace pagedattn
