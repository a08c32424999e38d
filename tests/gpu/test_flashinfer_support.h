// Shared by the FLASHINFER GPU tests: one step of a case through FLASHINFER on cuda:0 with the step
// runner (reordered decode-first, as FLASHINFER's reorder threshold asks), checked against the
// float64 oracle over a host-written copy of the cache (so the device cache write is checked too).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "test_flash_attn_support.h"

namespace pagedattn::test {

struct FlashInferRun {
  std::unique_ptr<testing::StepRunner> runner;
  reference::Comparison cmp;
};

// `tune` adjusts the builder's parameters (limits, deterministic mode, SM count).
inline FlashInferRun run_flashinfer(const testing::CaseSpec& spec, KVCacheLayout layout,
                                    const std::function<void(BuilderParams&)>& tune = {}) {
  FlashInferRun result;
  const AttentionBackend* backend = find_backend("FLASHINFER");
  EXPECT_NE(backend, nullptr);
  if (backend == nullptr) return result;
  testing::StepOptions options;
  options.cascade = testing::CascadeMode::kAlways;
  BuilderParams bp = testing::builder_params_for(spec, Device::cuda(0));
  bp.max_model_len = 1 << 17;
  if (tune) tune(bp);
  options.builder_params = bp;
  auto run = testing::StepRunner::prepare(spec, *backend, Device::cuda(0), layout, options);
  EXPECT_TRUE(run.ok()) << spec.name << ": " << run.status().to_string();
  if (!run.ok()) return result;
  const KVCacheAllocation expected_cache = host_cache_after_write((*run)->batch());
  const Status st = (*run)->run_step();
  EXPECT_TRUE(st.ok()) << spec.name << ": " << st.to_string();
  if (!st.ok()) return result;
  result.cmp = compare_with_oracle(**run, expected_cache);
  result.runner = std::move(run).value();
  return result;
}

inline void expect_flashinfer_matches_oracle(const testing::CaseSpec& spec,
                                             KVCacheLayout layout = KVCacheLayout::kNHD,
                                             const std::function<void(BuilderParams&)>& tune = {}) {
  const FlashInferRun r = run_flashinfer(spec, layout, tune);
  ASSERT_NE(r.runner, nullptr) << spec.name;
  const std::string_view generation = r.runner->kernel_generation();  // v3 where it serves a prefill
  EXPECT_TRUE(generation == "decode+v2" || generation == "decode+v3" ||
              generation == "decode+v3/v2")
      << generation;
  EXPECT_TRUE(r.cmp.pass) << spec.name << " (" << kv_cache_layout_name(layout) << "): " << r.cmp;
}

}  // namespace pagedattn::test
