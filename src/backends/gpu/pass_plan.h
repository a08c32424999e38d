// What both GPU builders ask of every step the same way: the split-KV question and the pass over
// the whole batch as the engine's metadata gives it.
#pragma once

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"
#include "pagedattn/metadata.h"
#include "plan/split_kv.h"

namespace pagedattn::gpu {

// The builder's split-KV config for a step of num_tokens tokens: the graph-safe bound, at most
// BuilderParams::max_num_splits (where set), 1 when deterministic (no split, so a request's
// reduction order never depends on the batch).
plan::SplitKVConfig split_config(const BuilderParams& params, int num_sms, int num_tokens,
                                 int64_t token_splits);

// Every request of the step, its keys through the block table, with the step's mask; no split.
PassMetadata pass_metadata(const CommonAttentionMetadata& meta);

}  // namespace pagedattn::gpu
