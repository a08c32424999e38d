// What both GPU builders ask of every step the same way: the split-KV question, the pass over the
// whole batch as the engine's metadata gives it, and the decode kernel's grid and plan.
#pragma once

#include <cstdint>
#include <span>

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"
#include "pagedattn/metadata.h"
#include "plan/decode_plan.h"
#include "plan/split_kv.h"
#include "plan/workspace.h"

namespace pagedattn::gpu {

// The builder's split-KV config for a step of num_tokens tokens: the graph-safe bound, at most
// BuilderParams::max_num_splits (where set), 1 when deterministic (no split, so a request's
// reduction order never depends on the batch).
plan::SplitKVConfig split_config(const BuilderParams& params, int num_sms, int num_tokens,
                                 int64_t token_splits);

// The step's host lengths: query_start_loc_cpu [num_reqs + 1] and seq_lens_cpu [num_reqs].
struct StepLengths {
  std::span<const int32_t> query_start_loc;
  std::span<const int32_t> seq_lens;
};
StepLengths step_lengths(const CommonAttentionMetadata& meta);

// Every request of the step, its keys through the block table, with the step's mask; no split.
PassMetadata pass_metadata(const CommonAttentionMetadata& meta);

// The decode kernel's grid for the builder's layers (SMs x CTAs one SM holds), 0 where no decode
// kernel serves their head size and dtypes.
int decode_grid_ctas(const BuilderParams& params, int num_sms);

// The decode plan for a grid of decode_ctas CTAs: heads, window, and under
// BuilderParams::deterministic the fixed chunks that keep a request's bits batch-invariant.
plan::DecodePlanConfig decode_plan_config(const BuilderParams& params, int decode_ctas);

// The step workspace a builder needs for its limits and decode grid.
plan::WorkspaceLayout step_workspace_layout(const BuilderParams& params, int decode_ctas);

}  // namespace pagedattn::gpu
