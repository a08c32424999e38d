#include "kernels/attention/split_combine.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pagedattn::kernels::attention {
namespace {

constexpr int kCombineThreads = 128;  // 4 columns each: head sizes up to 512

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    split_combine_kernel(const __grid_constant__ PagedAttentionParams p) {
  const int token = blockIdx.x;
  const int head = blockIdx.y;
  // Rows outside [cu_seqlens_q[0], cu_seqlens_q[num_reqs]) are not this launch's (FLASHINFER's
  // prefill pass starts after the decode rows, which its decode kernel writes).
  if (token < p.cu_seqlens_q[0] || token >= p.cu_seqlens_q[p.num_reqs]) return;
  // The request holding this token: the last r with cu_seqlens_q[r] <= token.
  int lo = 0, hi = p.num_reqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.cu_seqlens_q[mid] <= token) lo = mid; else hi = mid - 1;
  }
  // A request no slot of the launch names has 0 splits: its rows are another launch's.
  if (p.pass_requests != nullptr && p.num_splits_per_req[lo] == 0) return;
  const int num_splits = p.num_splits_per_req != nullptr
                             ? min(max(p.num_splits_per_req[lo], 1), p.max_num_splits)
                             : p.max_num_splits;
  const int64_t lse_stride = static_cast<int64_t>(p.num_heads) * p.num_tokens;
  const float* split_lse = p.split_lse + static_cast<int64_t>(head) * p.num_tokens + token;
  const int col = threadIdx.x * 4;  // thread 0 (column 0) writes the LSE
  if (col >= p.head_size) return;
  const int64_t out_stride = static_cast<int64_t>(p.num_tokens) * p.num_heads * p.head_size;
  const float* part =
      p.split_out + (static_cast<int64_t>(token) * p.num_heads + head) * p.head_size + col;
  float lse = 0.0f;
  const float4 o = merge_split_parts(
      num_splits, [&](int s) { return split_lse[s * lse_stride]; },
      [&](int s) { return *reinterpret_cast<const float4*>(part + s * out_stride); },
      p.sinks != nullptr ? p.sinks + head : nullptr, lse);
  store_columns4(static_cast<T*>(p.out) + token * p.out_token_stride + head * p.out_head_stride +
                     col,
                 o);
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[head * p.lse_head_stride + token] = lse;
}

}  // namespace

template <typename T>
cudaError_t launch_split_combine(const PagedAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_tokens), static_cast<unsigned>(p.num_heads));
  split_combine_kernel<T><<<grid, kCombineThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t launch_split_combine<__nv_bfloat16>(const PagedAttentionParams&, cudaStream_t);
template cudaError_t launch_split_combine<__half>(const PagedAttentionParams&, cudaStream_t);

}  // namespace pagedattn::kernels::attention
