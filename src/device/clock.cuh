// The SM's cycle counter, read in program order with the memory accesses around it: the marks of
// the decode kernel's diagnostic trace (decode_trace.cuh).
#pragma once

namespace pagedattn::device {

__device__ __forceinline__ long long sm_clock() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : : "memory");
  return t;
}

}  // namespace pagedattn::device
