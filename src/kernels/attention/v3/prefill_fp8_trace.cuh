// V3Fp8Bench's turn trace (kFp8TuneTrace; compiled out of every other variant): thread 0 of each
// consumer warpgroup, in the first kFp8TraceCtas CTAs, notes the SM clock at each mark of the
// first kFp8TraceSteps steps of its first work tile, so the two consumers' turns, waits and
// softmaxes can be laid side by side (both read the same SM's clock).
#pragma once

#include <cstdint>

#include "kernels/attention/v3/prefill_fp8_tuning.cuh"

namespace pagedattn::kernels::attention::v3 {

template <bool kTrace>
struct Fp8TurnTracer {
  long long* row = nullptr;  // this thread's step row, or null: not traced

  __device__ __forceinline__ Fp8TurnTracer(long long* trace, int consumer, int consumers) {
    if constexpr (kTrace) {
      if (trace != nullptr && threadIdx.x % 128 == 0 && blockIdx.x < kFp8TraceCtas) {
        row =
            trace + (int64_t{blockIdx.x} * consumers + consumer) * kFp8TraceSteps * kFp8TraceMarks;
      }
    }
  }
  // Marks of step `step` (steps past kFp8TraceSteps and later work tiles are not kept).
  __device__ __forceinline__ void mark(int step, Fp8TraceMark m) const {
    if constexpr (kTrace) {
      if (row == nullptr || step >= kFp8TraceSteps) return;
      long long t;
      asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : : "memory");
      row[step * kFp8TraceMarks + m] = t;
    }
  }
  __device__ __forceinline__ void done() { row = nullptr; }  // the first work tile is over
};

}  // namespace pagedattn::kernels::attention::v3
