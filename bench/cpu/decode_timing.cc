// A timing, not a check: CPU_ATTN's decode time per key and KV head on the
// bench's heads (32 / 8, head size 128) with bf16 queries, for a bf16 and an e4m3 cache, with the
// KV in the last-level cache (one request over 2048 keys: 8 MiB of bf16) and from DRAM (32
// requests: 256 MiB), on the SIMD target PAGEDATTN_CPU_SIMD chooses and PAGEDATTN_CPU_THREADS
// threads. Run: PAGEDATTN_CPU_THREADS=1 build/bench/pagedattn_cpu_bench
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "backends/cpu/simd_target.h"
#include "pagedattn/backend.h"
#include "testing/host_batch.h"
#include "testing/step_runner.h"

namespace pagedattn::cpu_test {
namespace {

// Median over `repeats` forwards of the decode step, in ns per key and KV head.
double ns_per_key_and_head(KVCacheDType cache, int requests, int context, int repeats) {
  testing::CaseSpec spec;
  spec.seed = 5;
  spec.kv_cache_dtype = cache;
  spec.seq_lens.assign(requests, context);
  spec.query_lens.assign(requests, 1);
  auto batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  const AttentionBackend* backend = find_backend("CPU_ATTN");
  auto runner = testing::StepRunner::for_batch(*batch, *backend, Device::cpu(), {});
  EXPECT_TRUE(runner.ok()) << runner.status().to_string();
  EXPECT_TRUE((*runner)->run_step(/*write_cache=*/true, /*want_lse=*/false).ok());
  std::vector<double> ns;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE((*runner)->run_step(/*write_cache=*/false, /*want_lse=*/false).ok());
    ns.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(ns.begin(), ns.begin() + repeats / 2, ns.end());
  return ns[repeats / 2] / (static_cast<double>(requests) * context * spec.num_kv_heads);
}

TEST(CpuDecodeTiming, NsPerKeyAndHead) {
  for (const KVCacheDType cache : {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3}) {
    const double l3 = ns_per_key_and_head(cache, 1, 2048, 41);
    const double dram = ns_per_key_and_head(cache, 32, 2048, 7);
    std::printf("%s %s: %.1f ns per key and KV head in L3, %.1f from DRAM\n",
                cpu::simd_target().c_str(), std::string(kv_cache_dtype_name(cache)).c_str(), l3,
                dram);
  }
}

}  // namespace
}  // namespace pagedattn::cpu_test
