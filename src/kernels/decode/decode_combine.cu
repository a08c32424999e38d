// Merges the f32 partials of split decode segments (decode_merge.cuh) after the decode kernel,
// when the kernel does not merge them itself: a fixed grid walks the plan's merge items.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/decode/decode_combine.h"
#include "kernels/decode/decode_merge.cuh"

namespace pagedattn::kernels::decode {
namespace {

constexpr int kCombineThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    decode_combine_kernel(const __grid_constant__ DecodeAttentionParams p, int group) {
  const char* plan = static_cast<const char*>(p.plan);
  const auto* header = reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* merges = reinterpret_cast<const DecodeMergeItem*>(plan + header->merges_offset);
  for (int m = blockIdx.x; m < header->num_merges; m += gridDim.x) {
    merge_segment<T>(p, group, merges[m], threadIdx.x, kCombineThreads);
  }
}

}  // namespace

template <typename T>
cudaError_t launch_decode_combine(const DecodeAttentionParams& p, int group, cudaStream_t stream) {
  decode_combine_kernel<T><<<p.num_ctas, kCombineThreads, 0, stream>>>(p, group);
  return cudaGetLastError();
}

template cudaError_t launch_decode_combine<__nv_bfloat16>(const DecodeAttentionParams&, int,
                                                          cudaStream_t);
template cudaError_t launch_decode_combine<__half>(const DecodeAttentionParams&, int, cudaStream_t);

}  // namespace pagedattn::kernels::decode
