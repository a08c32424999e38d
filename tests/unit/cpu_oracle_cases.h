// Shared by the CPU kernel tests that run a list of cases on one SIMD target: every case in both
// cache layouts through CPU_ATTN against the float64 oracle, failures naming target, case and layout.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {

inline void expect_cases_match_oracle(const std::vector<testing::CaseSpec>& cases,
                                      const std::string& target) {
  for (const testing::CaseSpec& spec : cases) {
    for (const KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
      auto batch = testing::make_host_batch(spec, layout);
      ASSERT_TRUE(batch.ok()) << batch.status().to_string();
      auto result = run_against_reference(*batch);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_TRUE(result->comparison.pass)
          << target << " " << spec.name << " d" << spec.head_size << " "
          << kv_cache_layout_name(layout) << "\n"
          << result->comparison.detail;
    }
  }
}

}  // namespace pagedattn::cpu_test
