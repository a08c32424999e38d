// DecodeBench's timing helpers: random fills, the read probes, median event timing, the variant
// filter and the timing of one kernel configuration.
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
#include "pagedattn/device_info.h"
#include "kernels/decode/kernel.cuh"
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

// How a configuration is timed: CTAs per SM (0: what its occupancy allows), the grid, the plan's
// unit overhead.
struct TimeOptions {
  int ctas_per_sm = 0;
  int num_ctas = 0;  // > 0: the grid (and plan) of exactly this many CTAs
  int overhead = plan::kUnitOverheadTokens;
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

// A kernel configuration (tile keys, stages, warps, tile sync) at D 128 with bf16 queries, planned
// for its own occupancy (or opt's) and timed as `opt` says.
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
  const int sms = cuda_device(0)->num_sms;
  const int ctas = opt.num_ctas > 0 ? opt.num_ctas : sms * per_sm;
  auto launch = [&](const kernels::DecodeAttentionParams& pp) {
    const decode_ns::DecodeArgs a = decode_ns::make_decode_args(pp);
    (void)decode_ns::launch_decode_config<Cfg, __nv_bfloat16>(a, nullptr);
  };
  plan::DecodePlanStats stats;
  const double ms = time_decode(ctas, opt, launch, &stats);
  std::string out =
      " " + name + "x" + std::to_string(per_sm) + ":" + std::to_string(ms) + " (grid " +
      std::to_string(ctas) + ", units " + std::to_string(stats.num_units) + ", merges " +
      std::to_string(stats.num_merges) + ", pool " + std::to_string(stats.pool_units) + ")";
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

}  // namespace pagedattn::test::decode_bench
