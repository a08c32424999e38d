// One step's batch as the engine hands it to the attention layer: the scheduler's work in the
// order the backend wants (decodes first when its builder asks), and the host arrays behind
// CommonAttentionMetadata: query_start_loc, seq_lens, the block table and the slot mapping.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "serve/scheduler.h"

namespace pagedattn::serve {

struct StepBatch {
  std::vector<int> request_ids;          // [num_reqs], in batch order
  std::vector<int32_t> query_start_loc;  // [num_reqs + 1]
  std::vector<int32_t> seq_lens;         // [num_reqs]: context + new tokens
  std::vector<int32_t> query_lens;       // [num_reqs]
  std::vector<int32_t> block_table;      // [num_reqs, table_width], unused entries 0 (null block)
  std::vector<int64_t> slot_mapping;     // [num_tokens]
  int table_width = 0;
  int num_reqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  // Tokens at the start of every request held by the same blocks and already computed (a multiple
  // of block_size): what the engine offers the builder's cascade rule.
  int common_prefix_len = 0;
  bool decode_only = false;  // every request schedules exactly one token
};

// `reorder_threshold`: the builder's reorder_batch_threshold (unset = keep the scheduler's order).
StepBatch make_step_batch(const SchedulerOutput& out, int block_size, int table_width,
                          std::optional<int> reorder_threshold);

}  // namespace pagedattn::serve
