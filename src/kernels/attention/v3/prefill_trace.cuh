// The v3 prefill kernels' turn trace, device side (prefill_trace.h has the layout). Compiled into
// the trace kernels only: kTrace false makes every call nothing.
#pragma once

#include <cstdint>

#include "device/clock.cuh"
#include "kernels/attention/v3/prefill_trace.h"

namespace pagedattn::kernels::attention::v3 {

template <bool kTrace>
struct TurnTracer {
  long long* row = nullptr;  // this thread's step rows, or null: not traced

  __device__ __forceinline__ TurnTracer(long long* trace, int consumer, int consumers) {
    if constexpr (kTrace) {
      if (trace != nullptr && threadIdx.x % 128 == 0 && blockIdx.x < kTraceCtas) {
        row = trace + (int64_t{blockIdx.x} * consumers + consumer) * kTraceSteps * kTraceMarks;
      }
    }
  }
  // The producer's row (thread 0 of the CTA, warp 0 of the producer warpgroup).
  __device__ __forceinline__ static TurnTracer producer(long long* trace, int consumers) {
    TurnTracer t{nullptr, 0, consumers};
    if constexpr (kTrace) {
      if (trace != nullptr && threadIdx.x == 0 && blockIdx.x < kTraceCtas) {
        t.row = trace + (int64_t{kTraceCtas} * consumers + blockIdx.x) * kTraceSteps * kTraceMarks;
      }
    }
    return t;
  }
  // Mark m of step `step` (steps past kTraceSteps are not kept).
  __device__ __forceinline__ void mark(int step, int m) const {
    if constexpr (kTrace) {
      if (row == nullptr || step >= kTraceSteps) return;
      row[step * kTraceMarks + m] = device::sm_clock();
    }
  }
  __device__ __forceinline__ void done() { row = nullptr; }  // the first work tile is over
};

}  // namespace pagedattn::kernels::attention::v3
