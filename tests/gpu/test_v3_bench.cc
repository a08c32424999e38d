// Timing of the v3 (Hopper) prefill kernel beside v2 on the standard suite's prefill shapes
// (requests x tokens, query / KV heads, head size; bf16, causal and not): v2 at its best block size
// (16); v3 through the dispatch (persistent grid) at blocks 16, 32, 64 and 128 and with one TMA
// box warp at 16 and 32 (kVariants), twice each, alternating. Disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='*V3Bench*'. The v2 bench's method: random inputs
// (never zeros), shuffled block ids, CUDA-event times of 20 launches after 3 warm-ups, median;
// causal counts the visible part. Also prints the largest difference between v2's and v3's outputs
// on the same inputs (each block size against v2 at that size).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using Launcher = Status (*)(const kernels::PagedAttentionParams&, void*);

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    v[i] = float_to_bf16_bits((static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * 4.0f);
  }
  return v;
}

struct Shape {
  const char* name;
  int num_reqs, len, heads, kv_heads, head_size;
  int q_len = 0;  // queries per request, the last of its len tokens; 0: all (a full prefill)
};

// num_reqs requests of len tokens each, the last q_len of them queries, NHD or HND, one block size.
struct PrefillBench {
  int block, num_reqs, len, heads, kv_heads, d, q_len;
  bool hnd;
  int tokens = num_reqs * q_len;
  int blocks_per_req = (len + block - 1) / block;
  DeviceArray<uint16_t> q{random_bf16(size_t(tokens) * heads * d, 1)};
  DeviceArray<uint16_t> cache{
      random_bf16(size_t(num_reqs) * blocks_per_req * block * 2 * kv_heads * d, 2)};
  DeviceArray<uint16_t> out{size_t(tokens) * heads * d};
  DeviceArray<float> lse{size_t(tokens) * heads};
  DeviceArray<int32_t> cu{starts()};
  DeviceArray<int32_t> seq{std::vector<int32_t>(num_reqs, len)};
  DeviceArray<int32_t> table{
      shuffled_ids(num_reqs * blocks_per_req)};  // request r: entries r * blocks_per_req..

  PrefillBench(int block_size, const Shape& shape, bool hnd_layout)
      : block(block_size),
        num_reqs(shape.num_reqs),
        len(shape.len),
        heads(shape.heads),
        kv_heads(shape.kv_heads),
        d(shape.head_size),
        q_len(shape.q_len > 0 ? shape.q_len : shape.len),
        hnd(hnd_layout) {}

  std::vector<int32_t> starts() const {
    std::vector<int32_t> cu(num_reqs + 1);
    for (int r = 0; r <= num_reqs; ++r) cu[r] = r * q_len;
    return cu;
  }
  static std::vector<int32_t> shuffled_ids(int n) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    return ids;
  }
  double flops(bool causal) const {
    const double keys = causal ? len - (q_len - 1) / 2.0 : len;  // the mask is bottom-right
    return 4.0 * tokens * keys * heads * d;
  }

  kernels::PagedAttentionParams params(bool causal) const {
    kernels::PagedAttentionParams p;
    p.q = q.get();
    p.q_token_stride = heads * d;
    p.q_head_stride = d;
    p.kv_cache = cache.get();
    p.cache_block_stride = int64_t{2} * block * kv_heads * d;
    p.cache_kv_stride = int64_t{block} * kv_heads * d;
    p.cache_token_stride = hnd ? d : kv_heads * d;
    p.cache_head_stride = hnd ? int64_t{block} * d : d;
    p.cu_seqlens_q = cu.get();
    p.seqused_k = seq.get();
    p.block_table = table.get();
    p.block_table_stride = blocks_per_req;
    p.num_reqs = num_reqs;
    p.num_tokens = tokens;
    p.max_query_len = q_len;
    p.max_seq_len = len;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.head_size = d;
    p.block_size = block;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.causal = causal;
    p.out = out.get();
    p.out_token_stride = heads * d;
    p.out_head_stride = d;
    p.lse = lse.get();
    p.lse_head_stride = tokens;
    return p;
  }
};

double median_ms(Launcher launch, const kernels::PagedAttentionParams& p) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(start);
    const Status st = launch(p, nullptr);
    cudaEventRecord(stop);
    // Checked per launch, so a fault is pinned on the row that caused it.
    EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess) << "launch " << i;
    EXPECT_TRUE(st.ok()) << st.to_string();
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void report(const char* shape, const char* kernel, bool causal, double ms, double flops) {
  std::printf("BENCH %-16s %-14s %-10s %8.3f ms %8.1f TFLOP/s\n", shape, kernel,
              causal ? "causal" : "noncausal", ms, flops / ms / 1e9);
}

std::vector<uint16_t> output_of(Launcher launch, const PrefillBench& b, bool causal) {
  cudaMemset(b.out.get(), 0xFF, size_t(b.tokens) * b.heads * b.d * 2);
  EXPECT_TRUE(launch(b.params(causal), nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return b.out.to_host();
}

// Largest |v3 - v2| over the outputs of both on b's inputs (infinite when either has a NaN).
double v3_v2_difference(Launcher v3_launch, const PrefillBench& b, bool causal) {
  const std::vector<uint16_t> v2 = output_of(kernels::launch_paged_attention, b, causal);
  const std::vector<uint16_t> v3 = output_of(v3_launch, b, causal);
  double worst = 0;
  for (size_t i = 0; i < v2.size(); ++i) {
    const double d = std::fabs(bf16_bits_to_float(v2[i]) - bf16_bits_to_float(v3[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

// One v3 row: a block size and a launcher (the dispatch or a producer variant, V3Grid).
struct Variant {
  const char* name;
  int block;
  Launcher launch;
};
const Variant kVariants[] = {
    {"v3 block 16", 16, launch_v3}, {"v3 block 16 1w", 16, launch_v3_one_box_warp},
    {"v3 block 32", 32, launch_v3}, {"v3 block 32 1w", 32, launch_v3_one_box_warp},
    {"v3 block 64", 64, launch_v3}, {"v3 block 128", 128, launch_v3},
};

// v2 at its own best block size (16); v3 through the dispatch at blocks 16, 32, 64 and 128 (pages
// smaller than the KV tile by one TMA box per page, from four producer warps) and with one box
// warp (1w); then each against v2 on the same inputs.
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
    // Every v3 row twice, alternating: on the long shapes the first v3 timing of a run came out
    // up to 10 % above the later ones, whichever variant it was (the clock settling).
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

// A launcher timed at block 128 (a schedule variant, V3Grid::tuning, or the dispatch).
struct Schedule {
  const char* name;
  Launcher launch;
};

// Median times of the variants on the same parameters, their launches interleaved one by one (21
// each after 3 warm-ups), so that clock drift over the run reaches every variant alike.
std::vector<double> interleaved_ms(const std::vector<Schedule>& variants,
                                   const kernels::PagedAttentionParams& p) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<std::vector<float>> times(variants.size());
  for (int i = 0; i < 24; ++i) {
    for (size_t v = 0; v < variants.size(); ++v) {
      cudaEventRecord(start);
      const Status st = variants[v].launch(p, nullptr);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      EXPECT_TRUE(st.ok()) << st.to_string();
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (i >= 3) times[v].push_back(ms);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::vector<double> medians;
  for (std::vector<float>& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

// The schedule variants at block 128 on the standard suite's prefill shapes; each variant's output
// against variant 0's on the same inputs.
TEST(V3Bench, DISABLED_Variants) {
  PAGEDATTN_REQUIRE_V3();
  const std::vector<Schedule> variants = {
      {"v3 tune 0", launch_v3_tuned<0>},   {"v3 tune 29", launch_v3_tuned<29>},
      {"v3 tune 31", launch_v3_tuned<31>}, {"v3 tune 61", launch_v3_tuned<61>},
      {"v3 tune 63", launch_v3_tuned<63>}, {"v3 dispatch", launch_v3}};
  for (const Shape& shape : kStandardShapes) {
    if (!kernels::paged_attention_head_size_built(shape.head_size)) continue;
    const PrefillBench b(128, shape, false);
    for (bool causal : {false, true}) {
      const std::vector<double> ms = interleaved_ms(variants, b.params(causal));
      for (size_t v = 0; v < variants.size(); ++v) {
        report(shape.name, variants[v].name, causal, ms[v], b.flops(causal));
      }
      const std::vector<uint16_t> base = output_of(variants[0].launch, b, causal);
      for (size_t k = 1; k + 1 < variants.size(); ++k) {  // not 0 itself, not the dispatch
        const Schedule& v = variants[k];
        const std::vector<uint16_t> out = output_of(v.launch, b, causal);
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          const double d = std::fabs(bf16_bits_to_float(base[i]) - bf16_bits_to_float(out[i]));
          worst = std::isnan(d) ? INFINITY : std::max(worst, d);
        }
        std::printf("BENCH %-16s %s vs tune 0, %s: max |difference| %.3g\n", shape.name, v.name,
                    causal ? "causal" : "noncausal", worst);
        EXPECT_LT(worst, 0.02) << shape.name << " " << v.name;
      }
    }
  }
}

// The dispatch's v3 alone on the standard shapes at block 128 (for comparing two builds of the
// library with one test binary).
TEST(V3Bench, DISABLED_Dispatch) {
  PAGEDATTN_REQUIRE_V3();
  const std::vector<Schedule> dispatch = {{"v3 dispatch", launch_v3}};
  for (const Shape& shape : kStandardShapes) {
    if (!kernels::paged_attention_head_size_built(shape.head_size)) continue;
    const PrefillBench b(128, shape, false);
    for (bool causal : {false, true}) {
      report(shape.name, "v3 dispatch", causal, interleaved_ms(dispatch, b.params(causal))[0],
             b.flops(causal));
    }
  }
}

// One launch each of 16 x 512 and 1 x 8192 (D 128, non-causal, the dispatch's v3), for a profiler.
TEST(V3Bench, DISABLED_ProfileLaunches) {
  PAGEDATTN_REQUIRE_V3();
  for (const Shape& shape :
       {Shape{"16x512 d128", 16, 512, 32, 8, 128}, Shape{"1x8192 d128", 1, 8192, 32, 8, 128}}) {
    const PrefillBench b(128, shape, false);
    EXPECT_TRUE(launch_v3(b.params(false), nullptr).ok());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

TEST(V3Bench, DISABLED_Prefill8192) {
  PAGEDATTN_REQUIRE_V3();
  compare({"1x8192 d128", 1, 8192, 32, 8, 128}, false);
}

// D 96 and 192 (when built), first: the heads of the standard suite's D 128 and D 256 shapes.
TEST(V3Bench, DISABLED_PrefillHeadSizes96And192) {
  PAGEDATTN_REQUIRE_V3();
  const Shape shapes[] = {{"1x8192 d96", 1, 8192, 32, 8, 96}, {"1x8192 d192", 1, 8192, 16, 4, 192}};
  for (const Shape& shape : shapes) {
    if (kernels::paged_attention_head_size_built(shape.head_size)) compare(shape, false);
  }
}

// The standard suite's other prefill shapes (those whose head size is built), and HND once.
TEST(V3Bench, DISABLED_PrefillShapes) {
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
