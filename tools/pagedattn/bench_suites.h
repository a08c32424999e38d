// Benchmark suites (lists of cases) and the work each case does: floating-point operations over
// the visible (query, key) pairs and bytes of K and V read.
#pragma once

#include <string>
#include <vector>

#include "pagedattn/types.h"
#include "testing/case_spec.h"

namespace pagedattn::cli {

inline constexpr const char* kSuiteNames[] = {"decode", "prefill",     "mixed", "cascade",
                                              "fp8",    "spec-verify", "all"};

// The cases of a suite for a device kind (the GPU suites are larger); `quick` shrinks them for CI.
std::vector<testing::CaseSpec> bench_suite(const std::string& suite, DeviceKind device, bool quick);

struct CaseWork {
  double flops = 0.0;  // 4 * D per visible (query, key) pair per query head
  double kv_bytes =
      0.0;  // K and V of each request's visible keys (a shared prefix once), cache dtype
  int64_t tokens = 0;
};
CaseWork case_work(const testing::CaseSpec& spec);

}  // namespace pagedattn::cli
