// The decode kernel's stream pipeline: a CTA's units (its queue, decode/tile_scheduler.cuh) are one sequence
// of KV tiles, and the copy pipeline (and the block-id ring ahead of it) runs across unit
// boundaries, so the next unit's first tiles are in flight while this unit finishes and writes its
// output. Stream position
// p: stage p % kStages, ring slot p % kRingTiles.
#pragma once

#include "kernels/decode/epilogue.cuh"
#include "kernels/decode/split_merge.cuh"
#include "kernels/decode/tile_scheduler.cuh"
#include "kernels/decode/mainloop_load_tma.cuh"
#include "kernels/decode/work_unit.cuh"

namespace pagedattn::kernels::decode {

// A position in the CTA's tile stream: entry k of the unit queue, its tile t. Past the last entry
// it stays dead (copies zero-fill without reading).
template <typename Cfg>
struct TileCursor {
  const DecodeWorkUnit* units;
  char* smem;
  int group;
  int k = 0;
  int unit = -1;
  int t = 0;
  int t_end = 0;
  UnitWork w{};

  __device__ __forceinline__ TileCursor(const DecodeWorkUnit* units_, char* smem_, int group_)
      : units(units_), smem(smem_), group(group_) {
    enter();
  }
  __device__ __forceinline__ bool live() const { return unit >= 0; }
  // Moves to the first tile of entry k or the next entry that has one.
  __device__ __forceinline__ void enter() {
    for (;; ++k) {
      unit = queue_slot<Cfg>(smem, k)[0];
      if (unit < 0) return;
      w = load_unit(units, unit, group);
      t = first_tile(w, Cfg::kBlockN);
      t_end = end_tile(w, Cfg::kBlockN);
      if (t < t_end) return;
    }
  }
  __device__ __forceinline__ void advance() {
    if (!live()) return;
    if (++t == t_end) {
      ++k;
      enter();
    }
  }
};

// Publishes the copies this thread waited for to the threads that read them (Cfg::kSync).
template <typename Cfg>
__device__ __forceinline__ void tile_barrier() {
  if constexpr (Cfg::kTma) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// Runs the CTA's unit sequence (`q`: thread 0's publisher, nothing published yet).
template <typename Cfg, typename T>
__device__ __forceinline__ void run_stream(const DecodeArgs& a, const DecodeWorkUnit* units,
                                           UnitPublisher<Cfg>& q, char* smem) {
  if (threadIdx.x == 0) q.cover(smem, 0);
  __syncthreads();
  if (queue_slot<Cfg>(smem, 0)[0] < 0) return;
  constexpr int kAhead = Cfg::kStages - 1;  // K/V copies in flight ahead of the tile computed
  auto stage = [smem](int p) { return smem + (p % Cfg::kStages) * Cfg::kStageBytes; };
  auto* ring = reinterpret_cast<int32_t*>(smem + Cfg::kRingOffset);
  // Block ids run kRingTiles positions ahead; a slot is rewritten only after its copies issued.
  TileCursor<Cfg> ids(units, smem, a.group);
  for (int x = 0; x < Cfg::kRingTiles; ++x, ids.advance()) {
    fetch_block_ids<Cfg>(a, ids.w, ids.t, ids.live(), ring, x);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  tile_barrier<Cfg>();
  TileCursor<Cfg> kv(units, smem, a.group);
  auto issue_kv = [&](int x) {  // position x (kv's) into its stage
    if constexpr (Cfg::kTma) {
      issue_kv_slice_tma<Cfg>(a, kv.w, kv.t, kv.live(), ring, x % Cfg::kRingTiles, stage(x),
                              slice_barrier<Cfg>(smem, x % Cfg::kStages));
    } else {
      load_kv_tile<Cfg>(a, kv.w, kv.t, kv.live(), ring, x % Cfg::kRingTiles, stage(x));
    }
    kv.advance();
  };
  for (int x = 0; x < kAhead; ++x) {
    issue_kv(x);
    device::cp_async_commit();
  }

  int* merge_list = reinterpret_cast<int*>(smem + Cfg::kMergeListOffset);
  int* merge_flag = reinterpret_cast<int*>(smem + Cfg::kMergeFlagOffset);
  PieceCounter<Cfg> pieces;
  int p = 0;
  int u = queue_slot<Cfg>(smem, 0)[0];
  UnitWork w = load_unit(units, u, a.group);
  UnitContext<Cfg> c;
  prepare_unit<Cfg, T>(a, w, c);
  for (int j = 0;; ++j) {
    const bool count_now = w.partial >= 0 && !pieces.begin_cut(a, u, merge_list);
    WarpState<Cfg> st;
    begin_unit<Cfg, T>(a, c, st);
    const int t_end = end_tile(w, Cfg::kBlockN);
    for (int t = first_tile(w, Cfg::kBlockN); t < t_end; ++t, ++p) {
      device::cp_async_wait<Cfg::kStages - 2>();
      tile_barrier<Cfg>();
      if constexpr (Cfg::kTma) {  // use p / kStages of the stage
        device::mbarrier_wait(slice_barrier<Cfg>(smem, p % Cfg::kStages), (p / Cfg::kStages) & 1);
      }
      if constexpr (Cfg::kTma) zero_foreign_v_rows<Cfg>(w, t, stage(p));
      issue_kv(p + kAhead);
      fetch_block_ids<Cfg>(a, ids.w, ids.t, ids.live(), ring, p % Cfg::kRingTiles);
      ids.advance();
      device::cp_async_commit();
      compute_tile<Cfg, T>(a, w, c, st, t, stage(p));
    }
    // The entries the cursors reach during the next entry, published after this entry's tiles and
    // before its epilogue's barriers (so few units are held when the pool runs out).
    if (threadIdx.x == 0) q.cover(smem, j + 1);
    // Every warp is done with the last tile's stage before the epilogue reuses it; the stages
    // of the next tiles keep their copies in flight.
    __syncthreads();
    // The next unit's query loads fly during this unit's epilogue (its entry is published), where
    // the registers allow (Cfg::kPrefetchQ).
    const int next = queue_slot<Cfg>(smem, j + 1)[0];
    UnitWork w_next{};
    UnitContext<Cfg> c_next;
    auto prepare_next = [&] {
      w_next = load_unit(units, next, a.group);
      prepare_unit<Cfg, T>(a, w_next, c_next);
    };
    if (Cfg::kPrefetchQ && next >= 0) prepare_next();
    char* epilogue =
        Cfg::kEpilogueInStage ? stage(p + Cfg::kStages - 1) : smem + Cfg::kPipelineBytes;
    store_unit<Cfg, T>(a, w, st, c.v_scale, epilogue, smem + Cfg::kMlOffset);
    if (count_now) pieces.template count_now<T>(a, u, merge_flag);
    if (next < 0) break;
    if (!Cfg::kPrefetchQ) prepare_next();
    u = next;
    w = w_next;
    c = c_next;
  }
  device::cp_async_wait<0>();  // no copy outlives the CTA
  pieces.template count_listed<T>(a, merge_list);
}

}  // namespace pagedattn::kernels::decode
