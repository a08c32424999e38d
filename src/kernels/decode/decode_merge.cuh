// The merge of one split decode segment: its pieces' f32 partials combined by LSE in piece order
// (deterministic; the split combine's rule, attention::merge_split_parts), the sink added once,
// the output and LSE written. Run by the combine kernel for every merge item, or inside the decode
// kernel by the CTA that finished a segment's last piece (DecodeArgs::merge_in_kernel).
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/split_combine.cuh"
#include "kernels/decode/decode_traits.cuh"

namespace pagedattn::kernels::decode {

// Threads [thread, ...) in steps of `threads` share the item's rows x column groups. Partials go
// through L2 (__ldcg): other CTAs wrote them during this launch.
template <typename T>
__device__ __forceinline__ void merge_segment(const DecodeAttentionParams& p, int group,
                                              const DecodeMergeItem& item, int thread,
                                              int threads) {
  const int kv_head = item.head_row >> 16, row0 = item.head_row & 0xFFFF;
  const int groups = (p.head_size + 3) / 4;
  for (int idx = thread; idx < item.rows * groups; idx += threads) {
    const int r = idx / groups, col = (idx % groups) * 4;
    const int gr = row0 + r;
    const int token = item.q_start + gr / group;
    const int head = kv_head * group + gr % group;
    const int64_t row = item.first_row + r;
    float lse = 0.0f;
    const float4 o = attention::merge_split_parts(
        item.num_pieces, [&](int k) { return __ldcg(p.partial_lse + row + k * item.rows); },
        [&](int k) {
          return __ldcg(reinterpret_cast<const float4*>(
              p.partial_out + (row + k * item.rows) * p.head_size + col));
        },
        p.sinks != nullptr ? p.sinks + head : nullptr, lse);
    attention::store_columns4(
        static_cast<T*>(p.out) + token * p.out_token_stride + head * p.out_head_stride + col, o);
    if (p.lse != nullptr && col == 0) p.lse[head * p.lse_head_stride + token] = lse;
  }
}

// Inside the decode kernel: the counts of finished pieces in the plan's merge_done, taken without
// waiting for them. After a cut unit's partial rows are written (and a barrier), thread 0 counts
// the piece (count()); the atomic's result is read one unit later, or after the CTA's last unit
// (resolve()): the CTA whose count was its segment's last merges the segment and resets the count
// to 0 for the next launch of the plan. Thread 0's state; the other threads carry it unused.
struct PieceCounter {
  int32_t* done = nullptr;  // the plan's merge_done
  int merge = -1;           // the merge item of the counted piece, -1: none pending
  int before = 0;           // the count the atomic found
  int pieces = 0;           // the item's piece count

  int next_merge = -1;      // the merge item of the cut unit being computed
  int next_pieces = 0;

  // At the start of cut unit `unit`: its merge item and piece count (loads that have the unit's
  // tiles to land).
  __device__ __forceinline__ void prepare(const DecodeArgs& a, int unit) {
    const char* plan = static_cast<const char*>(a.p.plan);
    const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
    const auto* merges = reinterpret_cast<const DecodeMergeItem*>(plan + h.merges_offset);
    // The plan is the kernel's to update here: the host zeroed merge_done when it wrote the plan.
    done = reinterpret_cast<int32_t*>(const_cast<char*>(plan) + decode_merge_done_offset(h));
    next_merge = reinterpret_cast<const int32_t*>(plan + decode_unit_merge_offset(h))[unit];
    next_pieces = merges[next_merge].num_pieces;
  }

  // After the prepared unit's partial rows are written and a barrier: counts its piece.
  __device__ __forceinline__ void count() {
    merge = next_merge;
    pieces = next_pieces;
    // The CTA's partial rows (ordered before by the barrier) before the count that publishes
    // them: one fence in one thread, as a grid barrier does.
    __threadfence();
    before = atomicAdd(done + merge, 1);
  }

  // The merge item this CTA is to merge now, or -1.
  __device__ __forceinline__ int resolve() {
    if (merge < 0) return -1;
    const int m = merge;
    merge = -1;
    if (before + 1 != pieces) return -1;
    __threadfence();  // the other pieces' partial rows, published by their counts
    done[m] = 0;
    return m;
  }
};

// All threads: merges item m (>= 0; thread 0's resolve(), published through shared memory by a
// barrier since).
template <typename T, int kThreads>
__device__ __forceinline__ void merge_item(const DecodeArgs& a, int m) {
  const char* plan = static_cast<const char*>(a.p.plan);
  const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* merges = reinterpret_cast<const DecodeMergeItem*>(plan + h.merges_offset);
  merge_segment<T>(a.p, a.group, merges[m], threadIdx.x, kThreads);
}

}  // namespace pagedattn::kernels::decode
