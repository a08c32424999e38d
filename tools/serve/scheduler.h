// A scheduler shaped like vLLM v1's: one token budget per step (max_num_batched_tokens) shared by
// running requests first (decodes and unfinished prompt chunks, in arrival order) and then waiting
// ones (new prompts and preempted requests), at most max_num_seqs running; prompts longer than the
// budget left are chunked. When the cache has no block for a running request, the most recently
// admitted running request is preempted (its blocks freed, recomputed later from the front of the
// queue), as vLLM's recompute preemption does.
#pragma once

#include <deque>
#include <vector>

#include "serve/kv_manager.h"
#include "serve/request.h"

namespace pagedattn::serve {

struct SchedulerConfig {
  int max_num_seqs = 32;
  int max_num_batched_tokens = 1024;
};

// One request's share of a step.
struct ScheduledWork {
  Request* request = nullptr;
  int num_tokens = 0;           // scheduled this step
  int num_computed_before = 0;  // tokens already in the cache (the context)
};

struct SchedulerOutput {
  std::vector<ScheduledWork> work;  // running requests first, then newly admitted ones
  int num_tokens = 0;
  std::vector<int> preempted;  // request ids preempted this step
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KVCacheManager& kv) : config_(config), kv_(kv) {}

  void add_request(Request* request);  // joins the waiting queue
  SchedulerOutput schedule();
  // After the step ran: the scheduled tokens are in the cache; a request whose tokens are all
  // computed samples one (token_of(request, position)); requests with all their output finish.
  // Returns the requests that finished.
  template <typename TokenOf>
  std::vector<Request*> update(const SchedulerOutput& out, TokenOf token_of);

  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }

 private:
  void preempt(Request& victim);
  std::vector<Request*> finish_done();

  SchedulerConfig config_;
  KVCacheManager& kv_;
  std::vector<Request*> running_;
  std::deque<Request*> waiting_;
};

template <typename TokenOf>
std::vector<Request*> Scheduler::update(const SchedulerOutput& out, TokenOf token_of) {
  for (const ScheduledWork& w : out.work) {
    Request& r = *w.request;
    r.num_computed_tokens = w.num_computed_before + w.num_tokens;
    kv_.cache_full_blocks(r, r.num_computed_tokens);
    if (r.num_computed_tokens == r.num_tokens()) r.tokens.push_back(token_of(r, r.num_tokens()));
  }
  return finish_done();
}

}  // namespace pagedattn::serve
