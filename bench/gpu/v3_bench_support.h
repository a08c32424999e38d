// Shared by the v3 benches (v3_bench.cc, v3_features_bench.cc, v3_gqa_bench.cc, v3_fp8_bench.cc):
// a paged prefill batch of equal requests on the device (random bf16 inputs, never zeros; shuffled
// block ids; ALiBi slopes and sinks for the features), its FLOP count over the visible (query,
// key) pairs, and CUDA-event medians of launches.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "common/mask.h"
#include "common/numeric.h"
#include "kernels/attention/v3/launch.h"
#include "test_v3_support.h"

namespace pagedattn::test {

using Launcher = Status (*)(const kernels::PagedAttentionParams&, void*);

inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
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

// The attention definition's features a bench launch uses (none by default).
struct BenchFeatures {
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  bool alibi = false;
  bool sinks = false;
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
  DeviceArray<float> slopes{per_head(0.5f)};     // ALiBi: 2^-(8 (h + 1) / heads) * 0.5 .. 0.5
  DeviceArray<float> sinks{per_head(2.0f)};

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
  std::vector<float> per_head(float top) const {
    std::vector<float> v(heads);
    for (int h = 0; h < heads; ++h) v[h] = top * std::exp2(-8.0f * (h + 1) / heads);
    return v;
  }
  static std::vector<int32_t> shuffled_ids(int n) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    return ids;
  }
  // 4 D Hq FLOPs per visible (query, key) pair (mask.h's rule).
  double flops(bool causal, const BenchFeatures& f = {}) const {
    const mask::MaskRule rule{causal, f.window_left, f.window_right};
    double pairs = 0;
    for (int i = 0; i < q_len; ++i) {
      const auto keys = mask::visible_keys(rule, int64_t{len}, int64_t{len - q_len + i});
      pairs += static_cast<double>(std::max<int64_t>(0, keys.hi - keys.lo + 1));
    }
    return 4.0 * num_reqs * pairs * heads * d;
  }

  kernels::PagedAttentionParams params(bool causal, const BenchFeatures& f = {}) const {
    kernels::PagedAttentionParams p;
    p.q = q.get();
    p.q_token_stride = heads * d;
    p.q_head_stride = d;
    p.k_cache = cache.get();
    p.v_cache = cache.get() + int64_t{block} * kv_heads * d;
    p.cache_block_stride = int64_t{2} * block * kv_heads * d;
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
    p.window_left = f.window_left;
    p.window_right = f.window_right;
    p.softcap = f.softcap;
    p.alibi_slopes = f.alibi ? slopes.get() : nullptr;
    p.sinks = f.sinks ? sinks.get() : nullptr;
    p.out = out.get();
    p.out_token_stride = heads * d;
    p.out_head_stride = d;
    p.lse = lse.get();
    p.lse_head_stride = tokens;
    return p;
  }
};

inline double median_ms(Launcher launch, const kernels::PagedAttentionParams& p) {
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

inline void report(const char* shape, const char* kernel, bool causal, double ms, double flops) {
  std::printf("BENCH %-16s %-14s %-10s %8.3f ms %8.1f TFLOP/s\n", shape, kernel,
              causal ? "causal" : "noncausal", ms, flops / ms / 1e9);
}

// The output of one launch on p (p.out poisoned first).
inline std::vector<uint16_t> output_of(Launcher launch, const PrefillBench& b,
                                       const kernels::PagedAttentionParams& p) {
  cudaMemset(b.out.get(), 0xFF, size_t(b.tokens) * b.heads * b.d * 2);
  EXPECT_TRUE(launch(p, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return b.out.to_host();
}
inline std::vector<uint16_t> output_of(Launcher launch, const PrefillBench& b, bool causal) {
  return output_of(launch, b, b.params(causal));
}

// Largest |x - y| over two bf16 outputs (infinite when either has a NaN).
inline double max_difference(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(bf16_bits_to_float(x[i]) - bf16_bits_to_float(y[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

// A named launcher, timed at block 128.
struct Schedule {
  const char* name;
  Launcher launch;
};

// Median times of the variants on the same parameters, their launches interleaved one by one (21
// each after 3 warm-ups), so that clock drift over the run reaches every variant alike.
inline std::vector<double> interleaved_ms(const std::vector<Schedule>& variants,
                                          const kernels::PagedAttentionParams& p) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<std::vector<float>> times(variants.size());
  for (int i = 0; i < 24; ++i) {
    // Rotated each round: a variant's time depends on what the one before it left in L2 (a
    // fixed order reads identical launches apart).
    for (size_t k = 0; k < variants.size(); ++k) {
      const size_t v = (k + i) % variants.size();
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

}  // namespace pagedattn::test
