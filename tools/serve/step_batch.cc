// make_step_batch: the model runner's part of vLLM v1 that turns scheduled work into metadata
// (_prepare_inputs, _compute_cascade_attn_prefix_len's prefix length).
#include "serve/step_batch.h"

#include <algorithm>

#include "pagedattn/metadata.h"

namespace pagedattn::serve {
namespace {

// Leading blocks that every request's table has in common, in tokens, capped by every request's
// context (the shared prefix may hold no query token).
int common_prefix_tokens(const std::vector<const ScheduledWork*>& work, int block_size) {
  if (work.empty()) return 0;
  const std::vector<int>& first = work[0]->request->blocks;
  size_t shared = first.size();
  int min_context = work[0]->num_computed_before;
  for (const ScheduledWork* w : work) {
    const std::vector<int>& blocks = w->request->blocks;
    size_t n = 0;
    while (n < shared && n < blocks.size() && blocks[n] == first[n]) ++n;
    shared = n;
    min_context = std::min(min_context, w->num_computed_before);
  }
  const int tokens = std::min(static_cast<int>(shared) * block_size, min_context);
  return tokens / block_size * block_size;
}

}  // namespace

StepBatch make_step_batch(const SchedulerOutput& out, int block_size, int table_width,
                          std::optional<int> reorder_threshold) {
  std::vector<const ScheduledWork*> work;
  for (const ScheduledWork& w : out.work) work.push_back(&w);
  if (reorder_threshold) {
    std::vector<ScheduledRequest> requests;
    for (const ScheduledWork* w : work) {
      requests.push_back({w->num_tokens, w->num_computed_before, w->request->num_prompt_tokens});
    }
    const BatchReorder reorder =
        reorder_batch_to_split_decodes_and_prefills(requests, *reorder_threshold);
    std::vector<const ScheduledWork*> ordered;
    for (int i : reorder.order) ordered.push_back(work[i]);
    work = std::move(ordered);
  }

  StepBatch b;
  b.num_reqs = static_cast<int>(work.size());
  b.table_width = table_width;
  b.block_table.assign(static_cast<size_t>(b.num_reqs) * table_width, 0);
  b.query_start_loc.push_back(0);
  b.decode_only = b.num_reqs > 0;
  for (int i = 0; i < b.num_reqs; ++i) {
    const ScheduledWork& w = *work[i];
    const Request& r = *w.request;
    const int seq_len = w.num_computed_before + w.num_tokens;
    b.request_ids.push_back(r.id);
    b.query_lens.push_back(w.num_tokens);
    b.seq_lens.push_back(seq_len);
    b.query_start_loc.push_back(b.query_start_loc.back() + w.num_tokens);
    std::copy(r.blocks.begin(), r.blocks.end(), b.block_table.begin() + int64_t{i} * table_width);
    for (int p = w.num_computed_before; p < seq_len; ++p) {
      b.slot_mapping.push_back(int64_t{r.blocks[p / block_size]} * block_size + p % block_size);
    }
    b.max_query_len = std::max(b.max_query_len, w.num_tokens);
    b.max_seq_len = std::max(b.max_seq_len, seq_len);
    b.decode_only = b.decode_only && w.num_tokens == 1;
  }
  b.num_tokens = b.query_start_loc.back();
  b.common_prefix_len = b.num_reqs > 1 ? common_prefix_tokens(work, block_size) : 0;
  return b;
}

}  // namespace pagedattn::serve
