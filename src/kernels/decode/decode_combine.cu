// Merges the f32 partials of split decode segments by LSE, in piece order (deterministic), adds
// the sink once and writes the output and LSE. A fixed grid walks the plan's merge items.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device/convert.cuh"
#include "device/softmax_state.cuh"
#include "kernels/decode/decode_combine.h"

namespace pagedattn::kernels::decode {
namespace {

constexpr int kCombineThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    decode_combine_kernel(const __grid_constant__ DecodeAttentionParams p, int group) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // the decode grid's partials (no-op without overlap_launch)
#endif
  const char* plan = static_cast<const char*>(p.plan);
  const auto* header = reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* merges = reinterpret_cast<const DecodeMergeItem*>(plan + header->merges_offset);
  const int num_merges = header->num_merges;
  const int groups = (p.head_size + 3) / 4;
  for (int m = blockIdx.x; m < num_merges; m += gridDim.x) {
    const DecodeMergeItem item = merges[m];
    const int kv_head = item.head_row >> 16, row0 = item.head_row & 0xFFFF;
    for (int idx = threadIdx.x; idx < item.rows * groups; idx += kCombineThreads) {
      const int r = idx / groups, col = (idx % groups) * 4;
      const int gr = row0 + r;
      const int token = item.q_start + gr / group;
      const int head = kv_head * group + gr % group;
      device::LseAccumulator acc;
      for (int k = 0; k < item.num_pieces; ++k) {
        acc.add(p.partial_lse[item.first_row + k * item.rows + r]);
      }
      if (p.sinks != nullptr) acc.add(p.sinks[head]);
      float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int k = 0; k < item.num_pieces; ++k) {
        const int64_t prow = item.first_row + k * item.rows + r;
        const float wgt = acc.weight(p.partial_lse[prow]);
        if (wgt == 0.0f) continue;  // an empty piece's partial may hold anything
        const float4 v = *reinterpret_cast<const float4*>(p.partial_out + prow * p.head_size + col);
        o.x += wgt * v.x;
        o.y += wgt * v.y;
        o.z += wgt * v.z;
        o.w += wgt * v.w;
      }
      T* out = static_cast<T*>(p.out) + token * p.out_token_stride + head * p.out_head_stride + col;
      uint2 packed;
      packed.x = device::pack_float2<T>(o.x, o.y);
      packed.y = device::pack_float2<T>(o.z, o.w);
      *reinterpret_cast<uint2*>(out) = packed;
      if (p.lse != nullptr && col == 0) p.lse[head * p.lse_head_stride + token] = acc.lse();
    }
  }
}

}  // namespace

template <typename T>
cudaError_t launch_decode_combine(const DecodeAttentionParams& p, int group, cudaStream_t stream,
                                  bool overlap_launch) {
  if (!overlap_launch) {
    decode_combine_kernel<T><<<p.num_ctas, kCombineThreads, 0, stream>>>(p, group);
    return cudaGetLastError();
  }
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(p.num_ctas);
  config.blockDim = dim3(kCombineThreads);
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, decode_combine_kernel<T>, p, group);
}

template cudaError_t launch_decode_combine<__nv_bfloat16>(const DecodeAttentionParams&, int,
                                                          cudaStream_t, bool);
template cudaError_t launch_decode_combine<__half>(const DecodeAttentionParams&, int, cudaStream_t,
                                                   bool);

}  // namespace pagedattn::kernels::decode
