// DecodeBench's timing helpers: random fills, the read probes, median event timing, the CTA
// timeline summary, the variant filter and the timing of one kernel configuration.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/decode/decode_attention.h"
#include "kernels/decode/decode_combine.h"
#include "kernels/decode/decode_kernel.cuh"
#include "plan/decode_plan.h"
#include "testing/read_probe.cuh"

namespace pagedattn::test::decode_bench {

__global__ void fill_random_bytes(uint32_t* p, int64_t n, uint32_t seed, uint32_t mask) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = h & mask;  // mask clears exponent bits: finite values of moderate size
  }
}

namespace decode_ns = kernels::decode;

// How a configuration is timed: CTAs per SM (0: what its occupancy allows), the plan's unit
// overhead and pool, the combine launched after it or not (the kernel alone), the CTA timeline.
struct TimeOptions {
  int ctas_per_sm = 0;
  int num_ctas = 0;  // > 0: the grid (and plan) of exactly this many CTAs
  int overhead = plan::kUnitOverheadTokens;
  int pool_permille = plan::kDefaultPoolPermille;
  int pool_min_piece = plan::kMinPoolPieceTokens;
  int cut_penalty = plan::kCutPenaltyTokens;  // DecodePlanConfig::cut_penalty_tokens
  int whole_ratio = plan::kWholePoolRatio;    // DecodePlanConfig::whole_pool_ratio
  bool combine = true;
  bool merge_in_kernel = false;  // the decode kernel merges split segments (no combine launch)
  decode_ns::PoolTake pool_take = decode_ns::DecodeArgs{}.pool_take;
  bool timeline = false;
};

// (num_ctas, plan options, launch, plan stats out) -> median ms of launch on a plan for num_ctas.
using TimeDecode = std::function<double(
    int, const TimeOptions&, const std::function<void(const kernels::DecodeAttentionParams&)>&,
    plan::DecodePlanStats*)>;

template <typename F>
double median_ms(F&& launch, bool once = false) {
  constexpr int kBackToBack = 4;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int per_sample = once ? 1 : kBackToBack;
  std::vector<float> ms;
  for (int i = 0; i < (once ? 1 : 17); ++i) {
    cudaEventRecord(a);
    for (int k = 0; k < per_sample; ++k) launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (once || i >= 2) ms.push_back(t / per_sample);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The CTAs' start and end times of the last launch, in us from the first start: the span, the
// spread of the starts, the ends (first, p10, p50, p90) and the idle share (the mean gap between
// a CTA's end and the last end, over the span: what a static plan's tail costs).
inline std::string timeline_summary(const std::vector<unsigned long long>& clock) {
  const size_t n = clock.size() / 2;
  std::vector<unsigned long long> ends(n);
  unsigned long long t0 = clock[0], last_start = clock[0];
  for (size_t c = 0; c < n; ++c) {
    t0 = std::min(t0, clock[2 * c]);
    last_start = std::max(last_start, clock[2 * c]);
    ends[c] = clock[2 * c + 1];
  }
  std::sort(ends.begin(), ends.end());
  const double span = static_cast<double>(ends.back() - t0);
  double idle = 0.0;
  for (unsigned long long e : ends) idle += static_cast<double>(ends.back() - e);
  char buf[200];
  std::snprintf(buf, sizeof(buf), "[span %.1f starts %.1f ends %.1f/%.1f/%.1f/%.1f idle %.1f%%]",
                span / 1e3, (last_start - t0) / 1e3, (ends.front() - t0) / 1e3,
                (ends[n / 10] - t0) / 1e3, (ends[n / 2] - t0) / 1e3, (ends[n * 9 / 10] - t0) / 1e3,
                100.0 * idle / (span * static_cast<double>(n)));
  return buf;
}

// The unit trace of the last launch (Cfg::kTrace), averaged over the traced units of every CTA
// but each CTA's first (it fills the pipeline) and last, in SM clock cycles: the tile loop and its
// tiles, the cycles its tiles waited for data (the first tile after a unit's start apart) and
// issued copies, the unit's end (publishing and the CTA barrier), the epilogue, and the gap to the
// next unit's loop.
inline std::string unit_trace_summary(const std::vector<long long>& trace, int ctas) {
  namespace d = decode_ns;
  double n = 0, loop = 0, tiles = 0, wait = 0, first = 0, issue = 0, sync = 0, epi = 0, gap = 0;
  double prep = 0, park = 0, meet = 0, merge = 0, stores = 0;
  for (int c = 0; c < ctas; ++c) {
    for (int j = 1; j + 1 < d::kTraceUnits; ++j) {
      const long long* u = &trace[(size_t{1} * c * d::kTraceUnits + j) * d::kTraceFields];
      const long long* next = u + d::kTraceFields;
      if (u[d::kTraceTiles] < 2 || next[d::kTraceTiles] < 1) continue;
      n += 1;
      loop += u[d::kTraceLoopEnd] - u[d::kTraceStart];
      tiles += u[d::kTraceTiles];
      wait += u[d::kTraceWait] - u[d::kTraceFirstWait];
      first += u[d::kTraceFirstWait];
      issue += u[d::kTraceIssue];
      sync += u[d::kTraceSynced] - u[d::kTraceLoopEnd];
      epi += u[d::kTraceStored] - u[d::kTraceSynced];
      gap += next[d::kTraceStart] - u[d::kTraceStored];
      prep += u[d::kTracePrepared] - u[d::kTraceSynced];
      park += u[d::kTraceParked] - u[d::kTracePrepared];
      meet += u[d::kTraceMet] - u[d::kTraceParked];
      merge += u[d::kTraceMerged] - u[d::kTraceMet];
      stores += u[d::kTraceStoreIssue];
    }
  }
  if (n == 0) return "[trace: no unit]";
  const double other_tiles = tiles - n;
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "[trace cycles, %.0f units: loop %.0f (%.1f tiles, %.0f each), first wait %.0f, "
                "other waits %.0f each, issue %.0f each, end+barrier %.0f, epilogue %.0f (next "
                "unit's loads %.0f, park %.0f, meet %.0f, merge+write %.0f of which issuing "
                "thread 0's stores %.0f), gap %.0f]",
                n, loop / n, tiles / n, loop / tiles, first / n,
                other_tiles > 0 ? wait / other_tiles : 0.0, issue / tiles, sync / n, epi / n,
                prep / n, park / n, meet / n, merge / n, stores / n, gap / n);
  return buf;
}

// A kernel configuration (tile keys, stages, warps, tile sync, loads-only probe) at D 128 with bf16
// queries, planned for its own occupancy (or opt's) and timed as `opt` says.
// DECODE_BENCH_VARIANTS: comma-separated name prefixes of the variants to time (unset: all).
inline bool variant_selected(const std::string& name) {
  const char* env = std::getenv("DECODE_BENCH_VARIANTS");
  if (env == nullptr) return true;
  const std::string list = env;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string prefix = list.substr(pos, end - pos);
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) return true;
    pos = end + 1;
  }
  return false;
}

// Prints its line as soon as it is timed (a variant that hangs leaves the others' lines).
template <typename Cfg>
std::string time_config(const TimeDecode& time_decode, const std::string& name,
                        TimeOptions opt = {}) {
  if (!variant_selected(name)) return "";
  const int per_sm = opt.ctas_per_sm > 0
                         ? opt.ctas_per_sm
                         : decode_ns::decode_config_ctas_per_sm<Cfg, __nv_bfloat16>();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int ctas = opt.num_ctas > 0 ? opt.num_ctas : sms * per_sm;
  unsigned long long* clock = nullptr;
  if (opt.timeline) cudaMalloc(&clock, size_t{2} * ctas * 8);
  long long* trace = nullptr;
  const size_t trace_values = size_t{1} * ctas * decode_ns::kTraceUnits * decode_ns::kTraceFields;
  if (Cfg::kTrace) {
    cudaMalloc(&trace, trace_values * 8);
    cudaMemset(trace, 0, trace_values * 8);
  }
  auto launch = [&](const kernels::DecodeAttentionParams& pp) {
    decode_ns::DecodeArgs a = decode_ns::make_decode_args(pp);
    a.cta_clock = clock;
    a.unit_trace = trace;
    a.merge_in_kernel = opt.merge_in_kernel;
    a.pool_take = opt.pool_take;
    (void)decode_ns::launch_decode_config<Cfg, __nv_bfloat16>(a, nullptr);
    if (opt.combine && !opt.merge_in_kernel) {
      (void)decode_ns::launch_decode_combine<__nv_bfloat16>(pp, a.group, nullptr);
    }
  };
  plan::DecodePlanStats stats;
  const double ms = time_decode(ctas, opt, launch, &stats);
  std::string out =
      " " + name + "x" + std::to_string(per_sm) + ":" + std::to_string(ms) + " (grid " +
      std::to_string(ctas) + ", units " + std::to_string(stats.num_units) + ", merges " +
      std::to_string(stats.num_merges) + ", pool " + std::to_string(stats.pool_units) + ")";
  if (clock != nullptr) {
    std::vector<unsigned long long> host(size_t{2} * ctas);
    cudaMemcpy(host.data(), clock, host.size() * 8, cudaMemcpyDeviceToHost);
    cudaFree(clock);
    out += timeline_summary(host);
  }
  if (trace != nullptr) {
    std::vector<long long> host(trace_values);
    cudaMemcpy(host.data(), trace, trace_values * 8, cudaMemcpyDeviceToHost);
    cudaFree(trace);
    out += unit_trace_summary(host, ctas);
  }
  std::printf("  variant%s\n", out.c_str());
  std::fflush(stdout);
  return out;
}

// The read ceiling of the same bytes: the probes of testing/read_probe.cuh (16-byte loads and
// each bulk-copy shape) over the K/V buffer, medians; printed each, the best returned (ms).
inline double time_read_probes(const void* data, size_t bytes, uint32_t* sink, double kv_bytes) {
  std::string line = "  read probes (TB/s): ldg";
  double best = median_ms([&] { testing::launch_ldg_read(data, bytes, sink); });
  char buf[96];
  std::snprintf(buf, sizeof(buf), " %.2f", kv_bytes / best / 1e9);
  line += buf;
  if (testing::bulk_read_supported()) {
    for (const testing::BulkReadShape& s : testing::kBulkReadShapes) {
      const double ms = median_ms([&] { (void)testing::launch_bulk_read(data, bytes, s); });
      std::snprintf(buf, sizeof(buf), " | bulk %dx%dx%dK %.2f", s.ctas_per_sm, s.stages,
                    s.chunk_bytes >> 10, kv_bytes / ms / 1e9);
      line += buf;
      best = std::min(best, ms);
    }
  }
  std::printf("%s\n", line.c_str());
  return best;
}

template <kernels::CacheKind kCache, int kBlockN, int kWarps, decode_ns::TileSync kSync,
          bool kLoadsOnly = false, int kStages = 3, bool kNoEpilogue = false, bool kTrace = false>
using BenchConfig = decode_ns::DecodeConfig<128, kCache, kBlockN, kStages, kWarps, kSync,
                                            kLoadsOnly, kNoEpilogue, kTrace>;

}  // namespace pagedattn::test::decode_bench
