// The CTA's unit sequence: its static units from the plan, then units taken one at a time from the
// plan's shared pool (one atomicAdd on the pool counter each), so that CTAs on SMs that stream
// faster take more of the pool. Thread 0 publishes the sequence into a shared-memory ring of
// (unit, stream end) slots; every warp's cursors and the compute read it from there. Thread 0
// publishes ahead of the stream (the entries the cursors reach before the next CTA barrier), and
// after the last entry a -1 marks the end.
#pragma once

#include "kernels/decode/mainloop_load.cuh"

namespace pagedattn::kernels::decode {

__device__ __forceinline__ int first_tile(const UnitWork& w, int block_n) {
  return w.kv_begin / block_n;
}
__device__ __forceinline__ int end_tile(const UnitWork& w, int block_n) {
  return (w.kv_end + block_n - 1) / block_n;
}

// Slot k % kQueueSlots of the ring holds entry k: [0] its unit (-1: the end), [1] the stream
// position one past its last tile.
template <typename Cfg>
__device__ __forceinline__ int* queue_slot(char* smem, int k) {
  return reinterpret_cast<int*>(smem + Cfg::kQueueOffset) + 2 * (k % Cfg::kQueueSlots);
}

// Thread 0's publishing state (the other threads carry it unused). Pool units are taken when
// published (the caller publishes at each unit's end, so few are held when the pool runs out: held
// units lengthen the tail) and counted at the pool's shortest unit's tiles (a lower bound:
// publishing by lower bounds still covers the cursors' reach), so a load of the unit does not stall
// the warp (the atomic does); when that bound is too short to cover the cursors' reach with one
// unit, the unit is loaded.
template <typename Cfg>
struct UnitPublisher {
  const DecodeWorkUnit* units;
  int next_static;  // the CTA's next static unit
  int end_static;
  int pool_begin;  // the pool: units [pool_begin, pool_end)
  int pool_end;
  int* pool_next;      // the plan's pool counter
  int pool_tiles;      // tiles of the pool's shortest unit (>= 1)
  int published = 0;
  int stream_end = 0;  // (a lower bound of) the stream position past the last published entry
  bool ended = false;

  __device__ __forceinline__ int unit_tiles(int u) const {
    const int4 range = reinterpret_cast<const int4*>(units + u)[1];  // head_row, begin, end
    return (range.z + Cfg::kBlockN - 1) / Cfg::kBlockN - range.y / Cfg::kBlockN;
  }

  __device__ __forceinline__ void publish_one(char* smem) {
    int u = -1;
    int tiles = 0;
    if (next_static < end_static) {
      u = next_static++;
      tiles = unit_tiles(u);
    } else {
      if (pool_begin < pool_end) {
        const int taken = pool_begin + atomicAdd(pool_next, 1);
        if (taken < pool_end) u = taken;
      }
      tiles = pool_tiles;
      // A pool with short units: their lower bound would publish (and so take) several units
      // ahead, which the other CTAs then cannot take; count this one's tiles instead.
      if (u >= 0 && pool_tiles <= Cfg::kRingTiles) tiles = unit_tiles(u);
    }
    int* slot = queue_slot<Cfg>(smem, published++);
    if (u < 0) ended = true;
    stream_end += u < 0 ? 0 : tiles;
    slot[0] = u;
    slot[1] = stream_end;
  }

  // Publishes entries until entry `j` and kRingTiles + 1 tiles past its end are out (the block-id
  // cursor's reach while entry j computes), or the end. Entry j - 1 and earlier are published.
  __device__ __forceinline__ void cover(char* smem, int j) {
    while (!ended &&
           (published <= j || stream_end < queue_slot<Cfg>(smem, j)[1] + Cfg::kRingTiles + 1)) {
      publish_one(smem);
    }
  }
};

// The last CTA to finish resets the pool counters for the next launch of the same plan (every CTA
// took its last pool unit before counting itself out).
__device__ __forceinline__ void leave_pool(DecodePoolCounters* counters) {
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(&counters->exited, 1) == static_cast<int>(gridDim.x) - 1) {
    counters->next = 0;
    counters->exited = 0;
  }
}

}  // namespace pagedattn::kernels::decode
