// Shared by the v3 benches (test_v3_bench.cc, test_v3_features_bench.cc): a paged prefill batch
// of equal requests on the device (random bf16 inputs, never zeros; shuffled block ids; ALiBi
// slopes and sinks for the features), its FLOP count over the visible (query, key) pairs, and
// CUDA-event medians of launches.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "kernels/attention/mask.h"
#include "kernels/attention/v3/launch.h"
#include "kernels/attention/v3/prefill_trace.h"
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
    const kernels::attention::MaskRule rule{causal, f.window_left, f.window_right};
    double pairs = 0;
    for (int i = 0; i < q_len; ++i) {
      const auto keys =
          kernels::attention::visible_keys(rule, int64_t{len}, int64_t{len - q_len + i});
      pairs += static_cast<double>(std::max<int64_t>(0, keys.hi - keys.lo + 1));
    }
    return 4.0 * num_reqs * pairs * heads * d;
  }

  kernels::PagedAttentionParams params(bool causal, const BenchFeatures& f = {}) const {
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
    // fixed order showed identical launches 3 % apart, sixteenth session).
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

// The producer's rows of a turn trace (the bf16 kernel's; zeros elsewhere): per CTA, the mean
// cycles (steps 2 to 30) from a K/V slot coming free to its copy issued, and from the copies of K_i
// and V_{i-1} issued to consumer 0 finding both landed (its step i); CTA 0's steps 8 to 10 on the
// consumers' timeline.
template <typename ConsumerMark>
void print_producer_trace(const std::vector<long long>& t, const ConsumerMark& at) {
  namespace v3 = kernels::attention::v3;
  constexpr int kConsumers = 2, kSteps = v3::kTraceSteps, kMarks = v3::kTraceMarks;
  auto producer = [&](int cta, int step, int mark) {
    return t[((size_t(v3::kTraceCtas) * kConsumers + cta) * kSteps + step) * kMarks + mark];
  };
  if (producer(0, 2, v3::kMarkKFree) == 0) return;
  std::printf("TRACE producer mean cycles (steps 2-30): cta %s\n",
              "K-free-to-issued V-free-to-issued K-issued-to-landed V-issued-to-landed");
  for (int cta = 0; cta < v3::kTraceCtas; ++cta) {
    double k_issue = 0, v_issue = 0, k_land = 0, v_land = 0;
    for (int step = 2; step < kSteps - 1; ++step) {
      k_issue += producer(cta, step, v3::kMarkKIssued) - producer(cta, step, v3::kMarkKFree);
      v_issue += producer(cta, step, v3::kMarkVIssued) - producer(cta, step, v3::kMarkVFree);
      const long long landed = at(cta, 0, step, v3::kMarkLoaded);
      k_land += landed - producer(cta, step, v3::kMarkKIssued);
      v_land += landed - producer(cta, step - 1, v3::kMarkVIssued);
    }
    const double n = kSteps - 3;
    std::printf("TRACE producer cta %d: %7.0f %7.0f %7.0f %7.0f\n", cta, k_issue / n, v_issue / n,
                k_land / n, v_land / n);
  }
  const long long origin = at(0, 0, 8, 0);
  for (int step = 8; step <= 10; ++step) {
    std::printf("TRACE timeline step %d producer (K free, K issued, V free, V issued):", step);
    for (int m = v3::kMarkKFree; m <= v3::kMarkVIssued; ++m) {
      std::printf(" %7lld", producer(0, step, m) - origin);
    }
    std::printf("\n");
  }
}

// Launches p twice through v3 with the consumers' turn trace (V3Grid::trace; p must be served by a
// trace kernel: bf16 at head size 128 without transforms, or the FP8 kFp8TuneTrace variant) and
// prints, from the second launch: per consumer of the first CTAs, the mean cycles of each part of
// a step (steps 2 to 30 of its first work tile); CTA 0's steps 8 to 10 as a timeline of both
// consumers (cycles from consumer 0's start of step 8); how much of each consumer's softmax the
// other's softmax overlaps. max_ctas > 0 cuts the persistent grid (V3Grid::max_ctas);
// page_panel_boxes: pages smaller than the tile by a box per page and panel.
inline void print_turn_trace(const kernels::PagedAttentionParams& params, int max_ctas = 0,
                             bool page_panel_boxes = false) {
  namespace v3 = kernels::attention::v3;
  constexpr int kConsumers = 2, kSteps = v3::kTraceSteps, kMarks = v3::kTraceMarks;
  const size_t entries = v3::trace_entries(kConsumers);
  DeviceArray<long long> trace{entries};
  kernels::PagedAttentionParams p = params;
  p.generation = kernels::KernelGeneration::kV3;
  kernels::detail::V3Grid grid;
  grid.trace = trace.get();
  grid.max_ctas = max_ctas;
  grid.page_panel_boxes = page_panel_boxes;
  for (int i = 0; i < 2; ++i) {
    cudaMemset(trace.get(), 0, sizeof(long long) * entries);
    const Status st =
        kernels::detail::launch_paged_attention_v3_scheduled(p, p.head_size, nullptr, grid);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<long long> t = trace.to_host();
  auto at = [&](int cta, int c, int step, int mark) {
    return t[((size_t(cta) * kConsumers + c) * kSteps + step) * kMarks + mark];
  };
  if (at(0, 0, 2, v3::kMarkStart) == 0) {
    ADD_FAILURE() << "no trace kernel ran for these parameters (V3Grid::trace)";
    return;
  }
  std::printf("TRACE mean cycles per step (steps 2-30):  cta c %s step\n",
              "wait-K wait-turn issue-S issue-PV wait-S softmax wait-PV pack");
  for (int cta = 0; cta < v3::kTraceCtas; ++cta) {
    for (int c = 0; c < kConsumers; ++c) {
      double sum[kMarks] = {};
      for (int step = 2; step < kSteps - 1; ++step) {
        for (int m = 0; m + 1 < kMarks; ++m) {
          sum[m] += at(cta, c, step, m + 1) - at(cta, c, step, m);
        }
        sum[kMarks - 1] += at(cta, c, step + 1, 0) - at(cta, c, step, 0);
      }
      std::printf("TRACE cta %d consumer %d:", cta, c);
      for (int m = 0; m < kMarks; ++m) std::printf(" %7.0f", sum[m] / (kSteps - 3));
      std::printf("\n");
    }
  }
  const long long origin = at(0, 0, 8, 0);
  for (int step = 8; step <= 10; ++step) {
    for (int c = 0; c < kConsumers; ++c) {
      std::printf("TRACE timeline step %d consumer %d:", step, c);
      for (int m = 0; m < kMarks; ++m) std::printf(" %7lld", at(0, c, step, m) - origin);
      std::printf("\n");
    }
  }
  print_producer_trace(t, at);
  // Softmax intervals [S done, softmax done]: the share of consumer c's that the other's overlap.
  for (int c = 0; c < kConsumers; ++c) {
    double own = 0, shared = 0;
    for (int step = 2; step < kSteps; ++step) {
      const long long lo = at(0, c, step, v3::kMarkScores), hi = at(0, c, step, v3::kMarkSoftmax);
      own += hi - lo;
      for (int other = 2; other < kSteps; ++other) {
        const long long olo = at(0, 1 - c, other, v3::kMarkScores);
        const long long ohi = at(0, 1 - c, other, v3::kMarkSoftmax);
        shared += std::max(0LL, std::min(hi, ohi) - std::max(lo, olo));
      }
    }
    std::printf("TRACE cta 0 consumer %d: %.0f %% of its softmax overlaps the other's\n", c,
                100.0 * shared / own);
  }
}

}  // namespace pagedattn::test
