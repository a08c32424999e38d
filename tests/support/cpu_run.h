// Runs a HostBatch through CPU_ATTN with testing::StepRunner (build, cache update, forward) and
// judges the result against the float64 oracle with the pass rule of check_case.py.
#pragma once

#include "pagedattn/backend.h"
#include "reference/compare.h"
#include "testing/host_batch.h"
#include "testing/step_runner.h"

namespace pagedattn::cpu_test {

struct RunOptions {
  AttentionType attn_type = AttentionType::kDecoder;
  // Whether the case's common_prefix_len reaches build(): by the cost rule (as an engine), always
  // (small tests that the rule would run plainly), or never.
  testing::CascadeMode cascade = testing::CascadeMode::kAuto;
  bool want_lse = true;
};

struct RunResult {
  testing::HostTensor output;  // [T, Hq, D] query dtype
  testing::HostTensor lse;     // [Hq, T] f32
  reference::Comparison comparison;
  int cascade_prefix_len = 0;  // what build() was asked to run as cascade
};

StatusOr<RunResult> run_against_reference(testing::HostBatch& batch,
                                          const RunOptions& options = {});

// Runs forward only (the cache already holds every token) into fresh NaN-poisoned buffers.
StatusOr<RunResult> run_forward_only(testing::HostBatch& batch, const RunOptions& options = {});

}  // namespace pagedattn::cpu_test
