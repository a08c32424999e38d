// Benchmark suites (lists of cases), what each case measures, its shape in the peer tool's terms,
// and the work it does: floating-point operations over the visible (query, key) pairs and bytes of
// K and V read.
#pragma once

#include <string>
#include <vector>

#include "pagedattn/types.h"
#include "testing/case_spec.h"

namespace pagedattn::cli {

// "all" is the first six; "standard" and "overhead" run only by name.
inline constexpr const char* kSuiteNames[] = {
    "decode",   "prefill",  "mixed",        "cascade", "fp8",
    "spec-verify", "standard", "overhead", "fp8-prefill", "all"};

enum class Measure {
  kForward,  // forward's time on the device's clock (median of repeats)
  kLaunch,   // host time per forward call issued back to back, beside the device time
  kBuild,    // host time of builder.build()
};

struct BenchCase {
  testing::CaseSpec spec;
  Measure measure = Measure::kForward;
  // A case timed alone to compare with the batch that holds it: the name of that batch.
  std::string part_of;
};

// The cases of a suite for a device kind (the GPU suites are larger); `quick` shrinks them for CI.
// An empty `block_sizes` keeps each case's own (128 for the standard suite's prefill shapes, 16
// elsewhere); otherwise every case runs once per listed block size.
std::vector<BenchCase> bench_suite(const std::string& suite, DeviceKind device, bool quick,
                                   const std::vector<int>& block_sizes = {});

// A case as the peer tool (peer_sdpa.py) names its shapes: batch, sequence (prefill: tokens per
// request; decode: context), heads, head size.
struct CaseShape {
  std::string kind;  // "prefill" (no context), "decode" (one query token each), else "mixed"
  int batch = 0;
  int seq = 0;  // the longest request's seq_len
  int num_heads = 0, num_kv_heads = 0, head_size = 0;
};
CaseShape case_shape(const testing::CaseSpec& spec);

struct CaseWork {
  double flops = 0.0;  // 4 * D per visible (query, key) pair per query head
  double kv_bytes =
      0.0;  // K and V of each request's visible keys (a shared prefix once), cache dtype
  int64_t tokens = 0;
};
CaseWork case_work(const testing::CaseSpec& spec);

}  // namespace pagedattn::cli
