// A consumer warpgroup of the v3 prefill kernel: for its 64 query rows of each work tile and every
// KV tile, S = Q·Kᵀ by wgmma from shared memory, the score transforms (kTransform) and the mask
// (boundary tiles only; v3/score_mask.cuh), online softmax in registers (v3/softmax.cuh), O +=
// P·V by wgmma with P from registers; then the normalised output and the LSE
// (v3/epilogue.cuh). O is held in chunks of at most 128 columns (one P·V wgmma each).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "common/mask.h"
#include "kernels/attention/v3/epilogue.cuh"
#include "kernels/attention/v3/score_mask.cuh"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/attention/v3/softmax.cuh"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

// Issues S = Q_rows · K_tileᵀ over the head columns (k16 steps, four per panel) as one group, K's
// rows where `kv` puts them. The caller fences before and waits after.
template <int kD>
__device__ __forceinline__ void issue_scores(float (&s)[PrefillTraits<kD>::kScoreRegs],
                                             uint32_t q_base, uint32_t k_base, KvTileStrides kv) {
  using S = PrefillTraits<kD>;
  const uint64_t q_desc = device::wgmma_desc_sw128(q_base, 16, 1024);
  const uint64_t k_desc = device::wgmma_desc_sw128(k_base, 16, kv.group);
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    device::wgmma_k16_ss<__nv_bfloat16, 0>(
        s, device::wgmma_desc_advance(q_desc, (kk / 4) * S::kQPanelBytes + (kk % 4) * 32),
        device::wgmma_desc_advance(k_desc, (kk / 4) * kv.panel + (kk % 4) * 32), kk > 0);
  }
  device::wgmma_commit_group();
}

// Issues O += P · V_tile as one group, P as bf16 A fragments (one per 16 keys), V MN-major (k16
// steps of two 8-row groups) where `kv` puts its rows; O chunk c covers V's panels 2c and 2c + 1
// (one panel at D 64).
template <int kD>
__device__ __forceinline__ void issue_pv(
    float (&o)[PrefillTraits<kD>::kOChunks][PrefillTraits<kD>::kOChunkRegs],
    const uint32_t (&p)[PrefillTraits<kD>::kKeySteps][4], uint32_t v_base, KvTileStrides kv) {
  using S = PrefillTraits<kD>;
  const uint64_t v_desc = device::wgmma_desc_sw128(v_base, kv.panel, kv.group);
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
    for (int kk = 0; kk < S::kKeySteps; ++kk) {
      const uint32_t offset = c * (S::kOChunkCols / 64) * kv.panel + kk * 2 * kv.group;
      device::wgmma_k16_rs<__nv_bfloat16, 1>(o[c], p[kk],
                                             device::wgmma_desc_advance(v_desc, offset), true);
    }
  }
  device::wgmma_commit_group();
}

// The consumer warpgroups take turns issuing their matrix products, in a ring (named barrier
// 1 + c is consumer c's turn; "ping-pong" with two), so that one's softmax runs while another's
// products keep the tensor cores busy. All walk the same work tiles, so the ring runs on across
// tiles.
struct IssueTurns {
  int consumer;
  int consumers;
  __device__ __forceinline__ void start() const {
    if (consumer == consumers - 1) device::named_barrier_arrive(1, 256);  // consumer 0 goes first
  }
  __device__ __forceinline__ void begin() const { device::named_barrier_sync(1 + consumer, 256); }
  // The CTA's last turn of the last consumer hands nothing on: consumer 0 has no turn left.
  __device__ __forceinline__ void end(bool last) const {
    if (!(last && consumer == consumers - 1)) {
      device::named_barrier_arrive(1 + (consumer + 1) % consumers, 256);
    }
  }
};

// A consumer's rows of one work tile.
struct TileRows {
  ThreadRows at;  // this thread's rows g and g + 8 (unpacked: at.pos[0] is row g's position)
  // Keys in [unmasked_lo, unmasked_hi] are visible to every row of the warpgroup.
  int unmasked_lo;
  int unmasked_hi;
  float slope;  // ALiBi slope of the tile's head in score units (ScoreRule); 0 without ALiBi
};

// One consumer warpgroup's pipeline over the CTA's work tiles. Step i of a tile issues
// S_i = Q·K_iᵀ, then O += P_{i-1}·V_{i-1}; it waits for S_i only and runs its softmax while that
// P·V still runs, then rescales O once it is done (intra-warpgroup overlap), and only when a row
// maximum grew in the warp. Q is released as soon as the tile's last S is done. The schedule is
// fixed at compile time: choices read at run time cost branches (docs/performance.md).
// kPacked: GQA-packed work tiles (PrefillArgs::packed_positions; no score transforms, O stored
// from the accumulators).
template <int kD, bool kTransform, bool kPacked>
struct Consumer {
  using S = PrefillTraits<kD>;
  static_assert(!(kTransform && kPacked), "the GQA-packed kernel has no score transforms");
  const PrefillArgs& a;
  PrefillSmem<kD>& s;
  IssueTurns turns;
  int use = 0;         // of the K/V ring, across work tiles
  int tile_count = 0;  // work tiles begun before the current one (its Q slot and phase)
  float o[S::kOChunks][S::kOChunkRegs];
  float sc[S::kScoreRegs];
  float alpha[2];
  uint32_t p[S::kKeySteps][4];
  RowState st;

  __device__ __forceinline__ TileRows rows_of(const PrefillTile& w) const {
    const int tid = threadIdx.x % 128;
    if constexpr (kPacked) return packed_rows_of(w, tid);
    const int first_row = w.q0 + turns.consumer * S::kRowsPerConsumer;  // of the warpgroup
    const int ctx = w.k_len - w.q_len;
    // Both ends of the visible range grow with the row: the first row has the lowest end, the
    // last the highest start.
    float slope = 0.0f;
    if constexpr (kTransform) {
      if (a.score.alibi_slopes != nullptr) {
        slope = a.score.alibi_slopes[w.head] * a.score.slope_factor;
      }
    }
    return {unpacked_rows(w, first_row + 16 * (tid / 32) + (tid % 32) / 4),
            mask::visible_keys(a.mask, w.k_len, first_row + S::kRowsPerConsumer - 1 + ctx).lo,
            mask::visible_keys(a.mask, w.k_len, first_row + ctx).hi, slope};
  }
  // The thread's rows at their use: unpacked, formed again from row g, so that only it stays live
  // through the tile (a TileRows::at kept whole spilled at D 256, ptxas -v).
  __device__ __forceinline__ ThreadRows rows_at(const PrefillTile& w, const TileRows& r) const {
    if constexpr (kPacked) return r.at;
    return unpacked_rows(w, r.at.pos[0]);
  }
  // Packed: the warpgroup's rows span the positions of its first and last tile rows (the last
  // that holds a position: kBlockM need not be a multiple of the group).
  __device__ __forceinline__ TileRows packed_rows_of(const PrefillTile& w, int tid) const {
    const int first = turns.consumer * S::kRowsPerConsumer;  // tile row of the warpgroup
    const int last = min(first + S::kRowsPerConsumer, a.packed_positions * a.group) - 1;
    const int ctx = w.k_len - w.q_len;
    return {packed_rows(a, w, first + 16 * (tid / 32) + (tid % 32) / 4),
            mask::visible_keys(a.mask, w.k_len, w.q0 + last / a.group + ctx).lo,
            mask::visible_keys(a.mask, w.k_len, w.q0 + first / a.group + ctx).hi, 0.0f};
  }
  __device__ __forceinline__ int stage(int u) const { return u % S::kStages; }
  __device__ __forceinline__ uint32_t parity(int u) const {
    return static_cast<uint32_t>((u / S::kStages) & 1);
  }
  // Tile t's Q buffer and phase (kQStages is 1 or 2).
  __device__ __forceinline__ int q_slot(int t) const { return t % S::kQStages; }
  __device__ __forceinline__ uint32_t q_phase(int t) const {
    return static_cast<uint32_t>((t / S::kQStages) & 1);
  }
  __device__ __forceinline__ uint32_t q_base(int t) const {
    return device::smem_addr(s.q[q_slot(t)]) + turns.consumer * S::kRowsPerConsumer * 128;
  }
  __device__ __forceinline__ void wait_q(int t) {
    device::mbarrier_wait(&s.q_full[q_slot(t)], q_phase(t));
  }
  __device__ __forceinline__ void release_q(int t) {
    device::mbarrier_arrive(&s.q_empty[q_slot(t)]);
  }
  __device__ __forceinline__ void wait_k(int u) {
    device::mbarrier_wait(&s.k_full[stage(u)], parity(u));
  }
  __device__ __forceinline__ void wait_v(int u) {
    device::mbarrier_wait(&s.v_full[stage(u)], parity(u));
  }
  __device__ __forceinline__ KvTileStrides kv_strides() const {
    return kv_tile_strides<kD>(a.kv_group_major);
  }
  __device__ __forceinline__ uint32_t k_at(int u) const { return device::smem_addr(s.k[stage(u)]); }
  __device__ __forceinline__ uint32_t v_at(int u) const { return device::smem_addr(s.v[stage(u)]); }
  __device__ __forceinline__ void wait_scores() {
    device::wgmma_wait_group<1>();
    device::wgmma_fence_operands(sc);
  }
  __device__ __forceinline__ void wait_all() {
    device::wgmma_wait_group<0>();
    device::wgmma_fence_operands(sc);
#pragma unroll
    for (int c = 0; c < S::kOChunks; ++c) device::wgmma_fence_operands(o[c]);
  }
  __device__ __forceinline__ void zero_o() {
#pragma unroll
    for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
      for (int i = 0; i < S::kOChunkRegs; ++i) o[c][i] = 0.0f;
    }
  }
  __device__ __forceinline__ void store(const PrefillTile& w, const TileRows& r,
                                        const RowState& rows) {
    if (a.max_splits > 1) {
      store_split_rows<kD>(o, rows, a, w, rows_at(w, r));
      return;
    }
    if constexpr (S::kStagedO && !kPacked) {
      if (a.staged_o) {
        store_rows_staged<kD>(o, rows, a, w, r.at.pos[0],
                              w.q0 + turns.consumer * S::kRowsPerConsumer, s.o[turns.consumer],
                              1 + S::kConsumers + turns.consumer);
        return;
      }
    }
    store_rows<kD>(o, rows, a, w, rows_at(w, r));
  }
  // S of the tile's KV tile i to P (transforms, mask on boundary tiles, softmax); true when O
  // needs the rescale.
  __device__ __forceinline__ bool scores_to_p(const PrefillTile& w, const TileRows& r, int i) {
    const int key0 = (w.kv_tile0 + i) * S::kBlockN;
    if constexpr (kTransform) {
      transform_scores(sc, a.score, r.slope, r.at.pos[0] + w.k_len - w.q_len, key0);
    }
    if (key0 < r.unmasked_lo || key0 + S::kBlockN - 1 > r.unmasked_hi) {
      mask_tile(sc, a, w, rows_at(w, r), key0);
    }
    return softmax_tile(sc, st, a.scale_log2, kRescaleThreshold, alpha);
  }

  // A tile's S_0.
  __device__ __forceinline__ void first_step(const PrefillTile& w, const TileRows& r) {
    zero_o();
    wait_q(tile_count);
    wait_k(use);
    turns.begin();
    device::wgmma_fence();
    issue_scores<kD>(sc, q_base(tile_count), k_at(use), kv_strides());
    turns.end(false);
    wait_all();
    device::mbarrier_arrive(&s.k_empty[stage(use)]);
    if (w.num_kv_tiles == 1) release_q(tile_count);
    st = RowState{};
    scores_to_p(w, r, 0);
    pack_p(sc, p);  // O is still zero: nothing to rescale
  }

  // Step i (1 .. num_kv_tiles - 1): S_i with P_{i-1}·V_{i-1}.
  __device__ __forceinline__ void middle_step(const PrefillTile& w, const TileRows& r, int i) {
    const int k = use + i, v = use + i - 1;
    wait_k(k);
    wait_v(v);
    turns.begin();
    device::wgmma_fence();
    issue_scores<kD>(sc, q_base(tile_count), k_at(k), kv_strides());
    issue_pv<kD>(o, p, v_at(v), kv_strides());
    turns.end(false);
    wait_scores();
    device::mbarrier_arrive(&s.k_empty[stage(k)]);
    if (i == w.num_kv_tiles - 1) release_q(tile_count);  // every S of the tile is complete
    const bool grew = scores_to_p(w, r, i);
    retire_pv(v, grew);
    pack_p(sc, p);
  }

  // After the softmax of step i: waits for P_{i-1}·V_{i-1}, frees V_{i-1}'s stage and rescales O
  // where a row maximum grew (a row's factor is 1 unless its maximum grew: the warp skips the
  // rescale when none did). With kSoftmaxBesidePv the warp's vote and its branch come before the
  // wait: ptxas places a wgmma wait at the top of its basic block, so a wait in the softmax's
  // block would run before the softmax and the two would never overlap.
  __device__ __forceinline__ void retire_pv(int v, bool grew) {
    if constexpr (S::kSoftmaxBesidePv) {
      if (__any_sync(0xffffffffu, grew)) {
        wait_all();
        rescale(o, alpha);
      }
    }
    wait_all();
    device::mbarrier_arrive(&s.v_empty[stage(v)]);
    if constexpr (!S::kSoftmaxBesidePv) {
      if (__any_sync(0xffffffffu, grew)) rescale(o, alpha);
    }
  }

  // The tile's last P·V alone, then its store. `last_tile`: no work tile follows in this CTA.
  __device__ __forceinline__ void last_step(const PrefillTile& w, const TileRows& r,
                                            bool last_tile) {
    const int v = use + w.num_kv_tiles - 1;
    wait_v(v);
    turns.begin();
    device::wgmma_fence();
    issue_pv<kD>(o, p, v_at(v), kv_strides());
    turns.end(last_tile);
    wait_all();
    device::mbarrier_arrive(&s.v_empty[stage(v)]);
    store(w, r, st);
    use += w.num_kv_tiles;
    ++tile_count;
  }
};

// Run by consumer warpgroup `consumer` (0 .. kConsumers - 1): the CTA's work tiles in order.
template <int kD, bool kTransform, bool kPacked>
__device__ __forceinline__ void consume(const PrefillArgs& a, int total_tiles, PrefillSmem<kD>& s,
                                        int consumer) {
  using S = PrefillTraits<kD>;
  Consumer<kD, kTransform, kPacked> c{a, s, IssueTurns{consumer, S::kConsumers}};
  const auto empty_split = [&](const PrefillTile& e) {
    store_empty_split<kD, kPacked>(a, e, consumer * S::kRowsPerConsumer);
  };
  TileWalk walk{total_tiles};
  PrefillTile w, next;
  if (!walk.find<kD, kPacked>(a, w, empty_split)) return;
  c.turns.start();
  TileRows r = c.rows_of(w);
  c.first_step(w, r);
  for (;;) {
    for (int i = 1; i < w.num_kv_tiles; ++i) c.middle_step(w, r, i);
    walk.advance();
    if (!walk.find<kD, kPacked>(a, next, empty_split)) {
      c.last_step(w, r, true);
      return;
    }
    c.last_step(w, r, false);
    w = next;
    r = c.rows_of(w);
    c.first_step(w, r);
  }
}

}  // namespace pagedattn::kernels::attention::v3
