// The serve loop's scheduler and step batches on hand-worked examples: the token budget shared
// running-first with chunked prefill, max_num_seqs, the metadata arrays of a step, recompute
// preemption when blocks run out, and the preempted request's prefix hit when it comes back.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "serve/scheduler.h"
#include "serve/step_batch.h"

namespace pagedattn::serve {
namespace {

struct Harness {
  Harness(int num_blocks, int block_size, SchedulerConfig config)
      : pool(num_blocks, true), kv(pool, block_size), scheduler(config, kv) {}
  Request* add(int id, int prompt_len, int output_len) {
    auto r = std::make_unique<Request>();
    r->id = id;
    for (int p = 0; p < prompt_len; ++p) r->tokens.push_back(100 * id + p);
    r->num_prompt_tokens = prompt_len;
    r->max_output_tokens = output_len;
    scheduler.add_request(r.get());
    requests.push_back(std::move(r));
    return requests.back().get();
  }
  std::vector<Request*> finish_step(const SchedulerOutput& out) {
    return scheduler.update(out,
                            [](const Request& r, int position) { return 7 * r.id + position; });
  }
  BlockPool pool;
  KVCacheManager kv;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Request>> requests;
};

struct Work {
  int id, tokens, computed;
  friend bool operator==(const Work&, const Work&) = default;
};
std::vector<Work> works(const SchedulerOutput& out) {
  std::vector<Work> w;
  for (const ScheduledWork& s : out.work)
    w.push_back({s.request->id, s.num_tokens, s.num_computed_before});
  return w;
}
std::ostream& operator<<(std::ostream& os, const Work& w) {
  return os << "(" << w.id << ", " << w.tokens << ", " << w.computed << ")";
}

TEST(ServeScheduler, BudgetRunningFirstChunkedPrefillAndMaxNumSeqs) {
  Harness h(11, 4, {/*max_num_seqs=*/2, /*max_num_batched_tokens=*/8});
  Request* a = h.add(0, 6, 2);
  Request* b = h.add(1, 5, 1);
  Request* c = h.add(2, 3, 1);

  // Step 0: A's whole prompt (6), then B's first chunk (the 2 tokens left); C waits.
  SchedulerOutput s0 = h.scheduler.schedule();
  EXPECT_EQ(works(s0), (std::vector<Work>{{0, 6, 0}, {1, 2, 0}}));
  EXPECT_EQ(s0.num_tokens, 8);
  EXPECT_EQ(a->blocks, (std::vector<int>{1, 2}));
  EXPECT_EQ(b->blocks, (std::vector<int>{3}));
  EXPECT_TRUE(h.finish_step(s0).empty());
  EXPECT_EQ(a->num_tokens(), 7);  // A sampled its first token; B is mid-prompt
  EXPECT_EQ(b->num_tokens(), 5);

  // Step 1: A decodes, B finishes its prompt (3 tokens, a second block); C still waits: two
  // running.
  SchedulerOutput s1 = h.scheduler.schedule();
  EXPECT_EQ(works(s1), (std::vector<Work>{{0, 1, 6}, {1, 3, 2}}));
  EXPECT_EQ(b->blocks, (std::vector<int>{3, 4}));
  const StepBatch batch = make_step_batch(s1, 4, /*table_width=*/3, std::nullopt);
  EXPECT_EQ(batch.query_start_loc, (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(batch.seq_lens, (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(batch.block_table, (std::vector<int32_t>{1, 2, 0, 3, 4, 0}));
  // A's position 6 is slot 2 of block 2; B's positions 2, 3, 4 are block 3's slots 2, 3, block 4's
  // 0.
  EXPECT_EQ(batch.slot_mapping, (std::vector<int64_t>{2 * 4 + 2, 3 * 4 + 2, 3 * 4 + 3, 4 * 4 + 0}));
  EXPECT_EQ(batch.max_query_len, 3);
  EXPECT_EQ(batch.max_seq_len, 7);
  EXPECT_FALSE(batch.decode_only);
  EXPECT_EQ(h.finish_step(s1).size(), 2u);  // A has its 2 tokens, B its 1
  EXPECT_EQ(h.pool.num_free(), 10);

  SchedulerOutput s2 = h.scheduler.schedule();
  EXPECT_EQ(works(s2), (std::vector<Work>{{2, 3, 0}}));
  EXPECT_EQ(c->status, RequestStatus::kRunning);
}

TEST(ServeScheduler, PreemptsTheLastAdmittedWhenBlocksRunOutThenItHitsItsOwnPrefix) {
  Harness h(4, 4, {4, 16});  // 3 usable blocks of 4 tokens
  Request* a = h.add(0, 4, 3);
  Request* b = h.add(1, 4, 3);
  SchedulerOutput s0 = h.scheduler.schedule();
  EXPECT_EQ(works(s0), (std::vector<Work>{{0, 4, 0}, {1, 4, 0}}));
  h.finish_step(s0);  // both sample: 5 tokens each, a second block needed

  // Step 1: A takes the last free block; B finds none and is preempted (it is the last admitted).
  SchedulerOutput s1 = h.scheduler.schedule();
  EXPECT_EQ(works(s1), (std::vector<Work>{{0, 1, 4}}));
  EXPECT_EQ(s1.preempted, (std::vector<int>{1}));
  EXPECT_EQ(b->status, RequestStatus::kPreempted);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(b->num_preemptions, 1);
  h.finish_step(s1);

  // Step 2: B's first block is still cached (free), but B needs it plus one fresh block and only
  // that one block is free: B waits.
  SchedulerOutput s2 = h.scheduler.schedule();
  EXPECT_EQ(works(s2), (std::vector<Work>{{0, 1, 5}}));
  EXPECT_EQ(h.finish_step(s2).size(), 1u);  // A done, its blocks freed
  EXPECT_EQ(a->status, RequestStatus::kFinished);

  // Step 3: B comes back with a prefix hit on its own first block and recomputes only token 4.
  SchedulerOutput s3 = h.scheduler.schedule();
  EXPECT_EQ(works(s3), (std::vector<Work>{{1, 1, 4}}));
  EXPECT_EQ(b->blocks[0], 2);
  EXPECT_EQ(b->num_tokens(), 5);
}

TEST(ServeStepBatch, CommonPrefixIsTheSharedComputedBlocksAndReorderPutsDecodesFirst) {
  Request x, y, z;
  x.id = 0;
  x.blocks = {5, 6, 7};
  x.num_prompt_tokens = 40;
  y.id = 1;
  y.blocks = {5, 6, 8};
  y.num_prompt_tokens = 10;
  z.id = 2;
  z.blocks = {5, 6, 9};
  z.num_prompt_tokens = 9;
  SchedulerOutput out;
  out.work = {{&x, 4, 36}, {&y, 1, 10}, {&z, 1, 9}};  // a prefill chunk, then two decodes
  StepBatch b = make_step_batch(out, 16, 3, std::nullopt);
  EXPECT_EQ(b.common_prefix_len, 0);  // z has only 9 tokens computed: less than a block
  EXPECT_EQ(b.request_ids, (std::vector<int>{0, 1, 2}));
  out.work = {{&x, 4, 36}, {&y, 1, 20}, {&z, 1, 33}};
  b = make_step_batch(out, 16, 3, /*reorder_threshold=*/1);
  EXPECT_EQ(b.common_prefix_len, 16);  // blocks 5, 6 shared; y's context 20 caps it at one block
  EXPECT_EQ(b.request_ids, (std::vector<int>{2, 1, 0}));  // vLLM's swap puts the decodes first
  EXPECT_EQ(b.query_lens, (std::vector<int32_t>{1, 1, 4}));
}

}  // namespace
}  // namespace pagedattn::serve
