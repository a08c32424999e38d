// DecodeBench's unit trace (Cfg::kTrace; compiled out of every other configuration): thread 0
// notes the SM clock at the marks of each of the CTA's first kTraceUnits units and sums the
// cycles its tiles spent waiting for their data and issuing the next copies, so the cost of a
// unit's end (publishing, the CTA barrier, the epilogue) and the copies' bubble after it can be
// read apart; and the cycles its epilogue spends issuing its global stores (whether they wait
// behind the stream). The clock reads are ordered with the memory accesses around them.
#pragma once

#include "device/clock.cuh"
#include "kernels/decode/decode_traits.cuh"

namespace pagedattn::kernels::decode {

template <typename Cfg>
struct UnitTracer {
  long long* row = nullptr;  // the unit's fields, or null: not traced
  long long since = 0;
  long long wait = 0, first_wait = -1, issue = 0, tiles = 0, stores = 0;

  __device__ __forceinline__ void begin(const DecodeArgs& a, int j) {
    if constexpr (Cfg::kTrace) {
      row = threadIdx.x == 0 && j < kTraceUnits
                ? a.unit_trace + (int64_t{blockIdx.x} * kTraceUnits + j) * kTraceFields
                : nullptr;
      wait = issue = tiles = stores = 0;
      first_wait = -1;
      if (row != nullptr) row[kTraceStart] = device::sm_clock();
    }
  }
  __device__ __forceinline__ void restart() {
    if constexpr (Cfg::kTrace) since = device::sm_clock();
  }
  __device__ __forceinline__ void waited() {
    if constexpr (Cfg::kTrace) {
      const long long d = device::sm_clock() - since;
      wait += d;
      if (first_wait < 0) first_wait = d;
      ++tiles;
      since += d;
    }
  }
  __device__ __forceinline__ void issued() {
    if constexpr (Cfg::kTrace) issue += device::sm_clock() - since;
  }
  __device__ __forceinline__ void stored() {
    if constexpr (Cfg::kTrace) stores += device::sm_clock() - since;
  }
  __device__ __forceinline__ void mark(UnitTraceField f) {
    if constexpr (Cfg::kTrace) {
      if (row != nullptr) row[f] = device::sm_clock();
    }
  }
  __device__ __forceinline__ void end() {
    if constexpr (Cfg::kTrace) {
      if (row == nullptr) return;
      row[kTraceStored] = device::sm_clock();
      row[kTraceWait] = wait;
      row[kTraceFirstWait] = first_wait;
      row[kTraceIssue] = issue;
      row[kTraceTiles] = tiles;
      row[kTraceStoreIssue] = stores;
    }
  }
};

}  // namespace pagedattn::kernels::decode
