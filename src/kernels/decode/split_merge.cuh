// The merge of one split decode segment: its pieces' f32 partials combined by LSE in piece order
// (deterministic; the split combine's rule, attention::merge_split_parts), the sink added once,
// the output and LSE written. Run inside the decode kernel by the CTA that finished a segment's last
// piece: no combine launch after the kernel.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/split_combine.cuh"
#include "kernels/decode/traits.cuh"

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

// Inside the decode kernel: the counts of finished pieces in the plan's merge_done. The CTA lists
// its cut units' merge items (thread 0, at each cut unit's start) and counts them all when its
// stream is done: one fence per CTA where nothing else is in flight (a fence in the stream waits
// for the thread's copies in flight), the atomics issued side by side by one thread each. The CTA
// whose count was a segment's last merges the segment and resets its count to 0 for the next
// launch of the plan. Past kListed cut units a CTA counts and merges at each unit's end instead
// (waiting for the count).
template <typename Cfg>
struct PieceCounter {
  static constexpr int kListed = Cfg::kMergeListSlots;
  int cut_units = 0;  // every thread: the cut units begun so far

  __device__ __forceinline__ static int32_t* merge_done(const DecodeArgs& a) {
    const char* plan = static_cast<const char*>(a.p.plan);
    const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
    // The plan is the kernel's to update here: the host zeroed merge_done when it wrote the plan.
    return reinterpret_cast<int32_t*>(const_cast<char*>(plan) + decode_merge_done_offset(h));
  }
  __device__ __forceinline__ static const DecodeMergeItem& item(const DecodeArgs& a, int m) {
    const char* plan = static_cast<const char*>(a.p.plan);
    const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
    return reinterpret_cast<const DecodeMergeItem*>(plan + h.merges_offset)[m];
  }
  __device__ __forceinline__ static int unit_merge(const DecodeArgs& a, int unit) {
    const char* plan = static_cast<const char*>(a.p.plan);
    const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
    return reinterpret_cast<const int32_t*>(plan + decode_unit_merge_offset(h))[unit];
  }

  // Counts one piece of item m; whether it was the last (then resets the count). The caller
  // fenced after the piece's partial rows (and a barrier).
  __device__ __forceinline__ static bool count_piece(const DecodeArgs& a, int m) {
    int32_t* done = merge_done(a) + m;
    if (atomicAdd(done, 1) + 1 != item(a, m).num_pieces) return false;
    __threadfence();  // the other pieces' partial rows, published by their counts
    *done = 0;
    return true;
  }

  // Every thread, at the start of cut unit `unit`: listed (by thread 0) or not.
  __device__ __forceinline__ bool begin_cut(const DecodeArgs& a, int unit, int* list) {
    const bool listed = cut_units < kListed;
    if (listed && threadIdx.x == 0) list[cut_units] = unit_merge(a, unit);
    ++cut_units;
    return listed;
  }

  // Every thread, after an unlisted cut unit's partial rows are written (and a barrier).
  template <typename T>
  __device__ __forceinline__ void count_now(const DecodeArgs& a, int unit, int* flag) {
    if (threadIdx.x == 0) {
      __threadfence();
      const int m = unit_merge(a, unit);
      *flag = count_piece(a, m) ? m : -1;
    }
    __syncthreads();
    const int m = *flag;
    if (m >= 0) merge_segment<T>(a.p, a.group, item(a, m), threadIdx.x, Cfg::kThreads);
    __syncthreads();  // the flag is the next unit's
  }

  // Every thread, after the CTA's last unit: counts the listed pieces, merges the segments whose
  // last piece this CTA counted.
  template <typename T>
  __device__ __forceinline__ void count_listed(const DecodeArgs& a, int* list) {
    const int n = min(cut_units, kListed);
    if (n == 0) return;
    __syncthreads();  // the list, and every partial row of the CTA
    if (threadIdx.x < n) {
      __threadfence();
      const int m = list[threadIdx.x];
      list[threadIdx.x] = count_piece(a, m) ? m : -1;
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      const int m = list[i];
      if (m >= 0) merge_segment<T>(a.p, a.group, item(a, m), threadIdx.x, Cfg::kThreads);
    }
  }
};

}  // namespace pagedattn::kernels::decode
