// Timing of the attention definition's features in the v3 prefill kernel beside v2 on 1 x 8192
// tokens, 32 query / 8 KV heads, head size 128, bf16: the plain path, a sliding window of 1024
// both ways (and a causal one of 1024), soft cap 50, ALiBi, sinks and all of them together. v2 at
// its best block size (16), v3 at blocks 128 and 16, each row twice, alternating; FLOPs over the
// visible pairs only (a window's count). Also prints the largest difference between v2's and v3's
// outputs on the same inputs. Run: pagedattn_gpu_bench --gtest_filter='V3Bench.Features*'
// (FeaturesHeadSizes: some of them at D 64 and 256).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "v3_bench_support.h"

namespace pagedattn::test {
namespace {

struct FeatureRow {
  const char* name;
  bool causal;
  BenchFeatures f;
};

const FeatureRow kRows[] = {
    {"plain", false, {}},
    {"plain", true, {}},
    {"window 1024/1024", false, {.window_left = 1024, .window_right = 1024}},
    {"window 1024/0", true, {.window_left = 1024, .window_right = 0}},
    {"softcap 50", false, {.softcap = 50.0f}},
    {"softcap 50", true, {.softcap = 50.0f}},
    {"alibi", false, {.alibi = true}},
    {"alibi", true, {.alibi = true}},
    {"sinks", false, {.sinks = true}},
    {"sinks", true, {.sinks = true}},
    {"all, window 1024/0",
     true,
     {.window_left = 1024, .window_right = 0, .softcap = 50.0f, .alibi = true, .sinks = true}},
};

// Each row of `rows` on `shape`: v2 at block 16, v3 at 128 and 16, twice, then v3 against v2.
template <size_t kN>
void time_rows(const Shape& shape, const FeatureRow (&rows)[kN]) {
  const PrefillBench b16(16, shape, false), b128(128, shape, false);
  for (const FeatureRow& row : rows) {
    const double flops = b128.flops(row.causal, row.f);
    const std::string name = std::string(shape.name) + " " + row.name;
    for (int round = 0; round < 2; ++round) {
      report(name.c_str(), "v2 block 16", row.causal,
             median_ms(kernels::launch_paged_attention, b16.params(row.causal, row.f)), flops);
      report(name.c_str(), "v3 block 128", row.causal,
             median_ms(launch_v3, b128.params(row.causal, row.f)), flops);
      report(name.c_str(), "v3 block 16", row.causal,
             median_ms(launch_v3, b16.params(row.causal, row.f)), flops);
    }
    const double worst = max_difference(
        output_of(kernels::launch_paged_attention, b128, b128.params(row.causal, row.f)),
        output_of(launch_v3, b128, b128.params(row.causal, row.f)));
    std::printf("BENCH %s v3 vs v2 output, %s: max |difference| %.3g\n", name.c_str(),
                row.causal ? "causal" : "noncausal", worst);
    EXPECT_LT(worst, 0.02) << name;
  }
}

TEST(V3Bench, Features) {
  PAGEDATTN_REQUIRE_V3();
  if (!kernels::paged_attention_head_size_built(128)) GTEST_SKIP() << "head size 128 not built";
  time_rows({"1x8192 d128", 1, 8192, 32, 8, 128}, kRows);
}

// The features at head sizes 64 and 256 (those built), non-causal: the transform kernel's
// register budgets differ most there (D 64: 160 per consumer thread).
TEST(V3Bench, FeaturesHeadSizes) {
  PAGEDATTN_REQUIRE_V3();
  const FeatureRow rows[] = {
      {"plain", false, {}},
      {"window 1024/1024", false, {.window_left = 1024, .window_right = 1024}},
      {"softcap 50", false, {.softcap = 50.0f}},
      {"alibi", false, {.alibi = true}}};
  for (const Shape& shape :
       {Shape{"1x8192 d64", 1, 8192, 32, 8, 64}, Shape{"1x8192 d256", 1, 8192, 16, 4, 256}}) {
    if (kernels::paged_attention_head_size_built(shape.head_size)) time_rows(shape, rows);
  }
}

}  // namespace
}  // namespace pagedattn::test
