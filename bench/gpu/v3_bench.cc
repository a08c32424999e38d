// Timing of the v3 (Hopper) prefill kernel beside v2 on the standard suite's prefill shapes
// (requests x tokens, query / KV heads, head size; bf16, causal and not): v2 at its best block size
// (16); v3 through the dispatch (persistent grid) at blocks 16, 32, 64 and 128 (kVariants), twice
// each, alternating. Run: pagedattn_gpu_bench --gtest_filter='V3Bench.*' (docs/kernels/README.md).
// Random inputs (never zeros), shuffled block ids, CUDA-event times of 20 launches after 3
// warm-ups, median; causal counts the visible part. Also prints the largest difference between
// v2's and v3's outputs on the same inputs (each block size against v2 at that size).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "v3_bench_support.h"

namespace pagedattn::test {
namespace {

// Largest |v3 - v2| over the outputs of both on b's inputs (infinite when either has a NaN).
double v3_v2_difference(Launcher v3_launch, const PrefillBench& b, bool causal) {
  return max_difference(output_of(kernels::launch_paged_attention, b, causal),
                        output_of(v3_launch, b, causal));
}

// One v3 row: a block size, through the dispatch.
struct Variant {
  const char* name;
  int block;
  Launcher launch;
};
const Variant kVariants[] = {
    {"v3 block 16", 16, launch_v3},
    {"v3 block 32", 32, launch_v3},
    {"v3 block 64", 64, launch_v3},
    {"v3 block 128", 128, launch_v3},
};

// v2 at its own best block size (16); v3 through the dispatch at blocks 16, 32, 64 and 128 (pages
// smaller than the KV tile by one TMA box per page); then each against v2 on the same inputs.
void compare(const Shape& shape, bool hnd) {
  const int blocks[] = {16, 32, 64, 128};
  std::vector<std::unique_ptr<PrefillBench>> benches;
  for (int block : blocks) benches.push_back(std::make_unique<PrefillBench>(block, shape, hnd));
  const auto bench_of = [&](int block) -> const PrefillBench& {
    for (const auto& b : benches) {
      if (b->block == block) return *b;
    }
    return *benches.front();
  };
  for (bool causal : {false, true}) {
    const double flops = bench_of(128).flops(causal);
    report(shape.name, "v2 block 16", causal,
           median_ms(kernels::launch_paged_attention, bench_of(16).params(causal)), flops);
    // Every v3 row twice, alternating: on the long shapes the first v3 timing of a run reads high,
    // whichever row it is (the clock settling).
    for (int round = 0; round < 2; ++round) {
      for (const Variant& v : kVariants) {
        report(shape.name, v.name, causal, median_ms(v.launch, bench_of(v.block).params(causal)),
               flops);
      }
    }
    // The block sizes hold different tokens (the same bytes, other layouts and block ids).
    for (const Variant& v : kVariants) {
      const double worst = v3_v2_difference(v.launch, bench_of(v.block), causal);
      std::printf("BENCH %-16s %s vs v2 output, %s: max |difference| %.3g\n", shape.name, v.name,
                  causal ? "causal" : "noncausal", worst);
      EXPECT_LT(worst, 0.02) << shape.name << " " << v.name;
    }
  }
}

// The standard suite's prefill shapes, the short requests first.
const Shape kStandardShapes[] = {{"16x512 d128", 16, 512, 32, 8, 128},
                                 {"4x2048 d128", 4, 2048, 32, 8, 128},
                                 {"1x8192 d128", 1, 8192, 32, 8, 128},
                                 {"1x8192 d64", 1, 8192, 32, 8, 64},
                                 {"1x8192 d256", 1, 8192, 16, 4, 256}};

// The dispatch's v3 alone on the standard shapes at blocks 128 and 16 (for comparing two builds of
// the library with one test binary).
TEST(V3Bench, Dispatch) {
  PAGEDATTN_REQUIRE_V3();
  const std::vector<Schedule> dispatch = {{"v3 dispatch", launch_v3}};
  for (const Shape& shape : kStandardShapes) {
    if (!kernels::paged_attention_head_size_built(shape.head_size)) continue;
    for (int block : {128, 16}) {
      const PrefillBench b(block, shape, false);
      const std::string name = "v3 block " + std::to_string(block);
      for (bool causal : {false, true}) {
        report(shape.name, name.c_str(), causal, interleaved_ms(dispatch, b.params(causal))[0],
               b.flops(causal));
      }
    }
  }
}

// One launch each of 16 x 512 and 1 x 8192 at D 128 and 1 x 8192 at D 256 (non-causal, the
// dispatch's v3), for a profiler.
TEST(V3Bench, ProfileLaunches) {
  PAGEDATTN_REQUIRE_V3();
  for (const Shape& shape :
       {Shape{"16x512 d128", 16, 512, 32, 8, 128}, Shape{"1x8192 d128", 1, 8192, 32, 8, 128},
        Shape{"1x8192 d256", 1, 8192, 16, 4, 256}}) {
    const PrefillBench b(128, shape, false);
    EXPECT_TRUE(launch_v3(b.params(false), nullptr).ok());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

TEST(V3Bench, Prefill8192) {
  PAGEDATTN_REQUIRE_V3();
  compare({"1x8192 d128", 1, 8192, 32, 8, 128}, false);
}

// D 64 (one 64-column panel: a page of block 16 is one 2 KB box, sixteen a step).
TEST(V3Bench, Prefill8192D64) {
  PAGEDATTN_REQUIRE_V3();
  if (kernels::paged_attention_head_size_built(64)) {
    compare({"1x8192 d64", 1, 8192, 32, 8, 64}, false);
  }
}

// Pages smaller than the KV tile at D 64 and 128, NHD and HND, non-causal, through the dispatch
// (a box per page by the group map); block 128 for scale. The first timing after the inputs are
// made reads high (the clock settling): compare rows of one run only.
TEST(V3Bench, SmallPages) {
  PAGEDATTN_REQUIRE_V3();
  for (const Shape& shape :
       {Shape{"1x8192 d64", 1, 8192, 32, 8, 64}, Shape{"1x8192 d128", 1, 8192, 32, 8, 128}}) {
    if (!kernels::paged_attention_head_size_built(shape.head_size)) continue;
    for (bool hnd : {false, true}) {
      for (int block : {16, 32, 64, 128}) {
        const PrefillBench b(block, shape, hnd);
        char name[48];
        std::snprintf(name, sizeof(name), "%s b%d", hnd ? "HND" : "NHD", block);
        report(shape.name, name, false, median_ms(launch_v3, b.params(false)), b.flops(false));
      }
    }
  }
}

// D 96 and 192 (when built), first: the heads of the standard suite's D 128 and D 256 shapes.
TEST(V3Bench, PrefillHeadSizes96And192) {
  PAGEDATTN_REQUIRE_V3();
  const Shape shapes[] = {{"1x8192 d96", 1, 8192, 32, 8, 96}, {"1x8192 d192", 1, 8192, 16, 4, 192}};
  for (const Shape& shape : shapes) {
    if (kernels::paged_attention_head_size_built(shape.head_size)) compare(shape, false);
  }
}

// The standard suite's other prefill shapes (those whose head size is built), and HND once.
TEST(V3Bench, PrefillShapes) {
  PAGEDATTN_REQUIRE_V3();
  const Shape shapes[] = {{"16x512 d128", 16, 512, 32, 8, 128},
                          {"4x2048 d128", 4, 2048, 32, 8, 128},
                          {"1x8192 d256", 1, 8192, 16, 4, 256},
                          {"1x8192 d64", 1, 8192, 32, 8, 64}};
  for (const Shape& shape : shapes) {
    if (kernels::paged_attention_head_size_built(shape.head_size)) compare(shape, false);
  }
  compare({"1x8192 d128 HND", 1, 8192, 32, 8, 128}, true);
}

}  // namespace
}  // namespace pagedattn::test
