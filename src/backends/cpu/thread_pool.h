// A small persistent thread pool shared by every CPU_ATTN call: the caller works too, and the
// workers spin briefly between calls (a forward issues several passes back to back) before they
// sleep, so that a small step does not pay a thread wake-up per pass.
#pragma once

#include <cstdint>
#include <utility>

namespace pagedattn::cpu {

// Threads used by CPU_ATTN (hardware_concurrency, or PAGEDATTN_CPU_THREADS when set).
int cpu_thread_count();

// Runs fn(context, i) for every i in [0, n) over the pool, the calling thread included; returns
// when all calls have finished. Items are handed out in order, one at a time. Concurrent callers
// take turns.
void parallel_for(int64_t n, void (*fn)(void* context, int64_t i), void* context);

// The same for any callable, without a heap allocation.
template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  parallel_for(
      n, [](void* context, int64_t i) { (*static_cast<std::remove_reference_t<Fn>*>(context))(i); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace pagedattn::cpu
