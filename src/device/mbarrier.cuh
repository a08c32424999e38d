// Shared-memory transaction barriers (mbarrier, sm_90) through CCCL's cuda::ptx: the completion
// signal of TMA copies (and of cp.async copies, by inline PTX) and the full/empty handshake of a
// producer/consumer ring.
//
// A barrier's phase completes when its pending arrivals (set by init) reach zero and the bytes it
// was told to expect (arrive_expect_tx) have landed; waiters name the phase by its parity. In a
// ring of S stages, use i of stage i % S is phase i / S: consumers wait on "full" with parity
// (i / S) & 1, producers on "empty" with the opposite parity, which the fresh barrier satisfies at
// once (its "previous" phase counts as complete).
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace pagedattn::device {

// One thread initialises; the fence makes the barrier visible to the async proxy (TMA) and the
// caller's block barrier to the other threads.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  cuda::ptx::mbarrier_init(bar, arrivals);
}
__device__ __forceinline__ void mbarrier_init_fence() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// Arrives once and adds `bytes` to the transaction count of the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, bar, bytes);
}

// Arrives once (release: this thread's earlier writes are visible to the waiters).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  (void)cuda::ptx::mbarrier_arrive(bar);
}

// Blocks until the phase with this parity has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace pagedattn::device
