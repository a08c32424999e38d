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

// Inside the decode kernel, after cut unit `unit` wrote its partial rows: counts the piece in the
// plan's merge_done; the CTA that counts its segment's last piece merges the segment and resets
// the count. `flag`: one int of shared memory free until the next epilogue.
template <typename T, int kThreads>
__device__ __forceinline__ void merge_if_last_piece(const DecodeArgs& a, int unit, int* flag) {
  const char* plan = static_cast<const char*>(a.p.plan);
  const auto& h = *reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* merges = reinterpret_cast<const DecodeMergeItem*>(plan + h.merges_offset);
  __syncthreads();
  if (threadIdx.x == 0) {
    // The CTA's partial rows (ordered before by the barrier) before the count that publishes
    // them: one fence in one thread, as a grid barrier does.
    __threadfence();
    const int m = reinterpret_cast<const int32_t*>(plan + decode_unit_merge_offset(h))[unit];
    // The plan is the kernel's to update here: the host zeroed merge_done when it wrote the plan.
    int32_t* done =
        reinterpret_cast<int32_t*>(const_cast<char*>(plan) + decode_merge_done_offset(h)) + m;
    const bool last = atomicAdd(done, 1) + 1 == merges[m].num_pieces;
    __threadfence();  // the other pieces' partial rows, published by their counts
    if (last) *done = 0;
    *flag = last ? m : -1;
  }
  __syncthreads();
  const int m = *flag;
  if (m >= 0) merge_segment<T>(a.p, a.group, merges[m], threadIdx.x, kThreads);
  __syncthreads();  // the flag's shared memory is the next epilogue's
}

}  // namespace pagedattn::kernels::decode
