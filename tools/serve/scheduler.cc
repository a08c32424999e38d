// Scheduler::schedule, following vLLM v1's Scheduler.schedule (running loop with preemption, then
// the waiting loop, which is skipped in a step that preempted).
#include "serve/scheduler.h"

#include <algorithm>

namespace pagedattn::serve {

void Scheduler::add_request(Request* request) {
  request->status = RequestStatus::kWaiting;
  waiting_.push_back(request);
}

void Scheduler::preempt(Request& victim) {
  kv_.free(victim);
  victim.num_computed_tokens = 0;
  victim.status = RequestStatus::kPreempted;
  ++victim.num_preemptions;
  waiting_.push_front(&victim);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = config_.max_num_batched_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request& r = *running_[i];
    const int n = std::min(r.num_tokens() - r.num_computed_tokens, budget);
    bool scheduled = true;
    while (!kv_.allocate_slots(r, n)) {
      Request* victim = running_.back();
      running_.pop_back();
      preempt(*victim);
      out.preempted.push_back(victim->id);
      if (victim == &r) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    out.work.push_back({&r, n, r.num_computed_tokens});
    budget -= n;
    ++i;
  }

  while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Request& r = *waiting_.front();
    const CachedPrefix prefix = kv_.find_cached_prefix(r);
    const int n = std::min(r.num_tokens() - prefix.num_tokens, budget);
    if (!kv_.allocate_slots(r, n, prefix)) break;
    waiting_.pop_front();
    r.status = RequestStatus::kRunning;
    r.num_computed_tokens = prefix.num_tokens;
    running_.push_back(&r);
    out.work.push_back({&r, n, prefix.num_tokens});
    budget -= n;
  }
  out.num_tokens = config_.max_num_batched_tokens - budget;
  return out;
}

std::vector<Request*> Scheduler::finish_done() {
  std::vector<Request*> finished;
  std::vector<Request*> still_running;
  for (Request* r : running_) {
    if (r->num_output_tokens() >= r->max_output_tokens) {
      kv_.free(*r);
      r->status = RequestStatus::kFinished;
      finished.push_back(r);
    } else {
      still_running.push_back(r);
    }
  }
  running_ = std::move(still_running);
  return finished;
}

}  // namespace pagedattn::serve
