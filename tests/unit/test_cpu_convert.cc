// The CPU kernel's branch-free element decoders (backends/cpu/attention_convert.inc) against the
// reference codecs of common/numeric.h, on every f16, e4m3 and e5m2 code. The .inc is included
// here the way the kernel builds include it: into a namespace of their own.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu::convert_test {
namespace {
#include "backends/cpu/attention_convert.inc"

// Same value, or both NaN (the NaN payloads may differ).
void expect_same(float got, float want, uint32_t code) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "code " << code;
  } else {
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "code " << code << ": " << got << " vs " << want;
  }
}

TEST(CpuConvert, F16EveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    expect_same(f16_to_float(static_cast<uint16_t>(c)), f16_bits_to_float(static_cast<uint16_t>(c)),
                c);
  }
}

TEST(CpuConvert, Fp8EveryCodeThroughLoadRow) {
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  float e4m3[256], e5m2[256];
  load_row(codes, DType::kFP8E4M3, 0, 256, 1.0f, e4m3);
  load_row(codes, DType::kFP8E5M2, 0, 256, 1.0f, e5m2);
  for (uint32_t c = 0; c < 256; ++c) {
    expect_same(e4m3[c], fp8_e4m3_to_float(static_cast<uint8_t>(c)), c);
    expect_same(e5m2[c], fp8_e5m2_to_float(static_cast<uint8_t>(c)), c);
  }
}

TEST(CpuConvert, StoreRowRoundsLikeTheReferenceEncoders) {
  // Every f16 value, its neighbours halfway between codes, and the specials, times 1.5.
  std::vector<float> values;
  for (uint32_t c = 0; c < 65536; c += 7) {
    const float x = f16_bits_to_float(static_cast<uint16_t>(c));
    values.push_back(x);
    values.push_back(std::nextafter(x, 0.0f));
  }
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(1e-40f);  // a float subnormal
  const int n = static_cast<int>(values.size());
  std::vector<uint16_t> bf16(n), f16(n);
  store_row(values.data(), n, 1.5f, DType::kBF16, bf16.data(), 0);
  store_row(values.data(), n, 1.5f, DType::kF16, f16.data(), 0);
  for (int i = 0; i < n; ++i) {
    const float x = values[i] * 1.5f;
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(bf16[i])));
      EXPECT_TRUE(std::isnan(f16_bits_to_float(f16[i])));
      continue;
    }
    EXPECT_EQ(bf16[i], float_to_bf16_bits(x)) << x;
    EXPECT_EQ(f16[i], float_to_f16_bits(x)) << x;
  }
}

}  // namespace
}  // namespace pagedattn::cpu::convert_test

// The AVX2 build's F16C decoders, included the way attention_kernel_avx2.cc includes them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // store_row: tested above
#define PAGEDATTN_CPU_F16C 1
namespace pagedattn::cpu::convert_test_f16c {
namespace {
#include "backends/cpu/attention_convert.inc"

TEST(CpuConvert, Fp8EveryCodeThroughF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "skipped: this CPU has no F16C";
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (float scale : {1.0f, 0.37f}) {
    float e4m3[256], e5m2[256];
    load_row(codes, DType::kFP8E4M3, 0, 256, scale, e4m3);
    load_row(codes, DType::kFP8E5M2, 0, 256, scale, e5m2);
    for (uint32_t c = 0; c < 256; ++c) {
      const float want4 = fp8_e4m3_to_float(static_cast<uint8_t>(c)) * scale;
      const float want5 = fp8_e5m2_to_float(static_cast<uint8_t>(c)) * scale;
      if (std::isnan(want4)) {
        EXPECT_TRUE(std::isnan(e4m3[c])) << c;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(e4m3[c]), std::bit_cast<uint32_t>(want4)) << c;
      }
      if (std::isnan(want5)) {
        EXPECT_TRUE(std::isnan(e5m2[c])) << c;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(e5m2[c]), std::bit_cast<uint32_t>(want5)) << c;
      }
    }
  }
}

}  // namespace
}  // namespace pagedattn::cpu::convert_test_f16c
#undef PAGEDATTN_CPU_F16C
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
