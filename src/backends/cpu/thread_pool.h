// A small persistent thread pool shared by every CPU_ATTN call: the caller works too, and the
// workers sleep between calls instead of being spawned per call.
#pragma once

#include <cstdint>
#include <functional>

namespace pagedattn::cpu {

// Threads used by CPU_ATTN (hardware_concurrency, or PAGEDATTN_CPU_THREADS when set).
int cpu_thread_count();

// Runs fn(i) for every i in [0, n) over the pool, the calling thread included; returns when all
// calls have finished. Items are handed out in order, one at a time. Concurrent callers take turns.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace pagedattn::cpu
