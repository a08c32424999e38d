// Picks the kernel instantiation for validated parameters and launches it, then the split combine.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/attention/paged_attention_combine.cuh"
#include "kernels/attention/paged_attention_dispatch.h"
#include "kernels/attention/paged_attention_traits.cuh"

namespace pagedattn::kernels {
namespace attention {

// Defined by the generated paged_attention_hd<N>_*.cu files.
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_paged_attention_instance(const KernelArgs& a, cudaStream_t stream);

namespace {

template <int kHeadDim, typename T>
cudaError_t launch_for_cache(const KernelArgs& a, cudaStream_t stream) {
  switch (a.p.cache_dtype) {
    case DType::kFP8E4M3:
      return launch_paged_attention_instance<kHeadDim, T, CacheKind::kFp8E4M3>(a, stream);
    case DType::kFP8E5M2:
      return launch_paged_attention_instance<kHeadDim, T, CacheKind::kFp8E5M2>(a, stream);
    default: return launch_paged_attention_instance<kHeadDim, T, CacheKind::kSame>(a, stream);
  }
}

template <int kHeadDim>
cudaError_t launch_for_dtype(const KernelArgs& a, cudaStream_t stream) {
  return a.p.q_dtype == DType::kBF16 ? launch_for_cache<kHeadDim, __nv_bfloat16>(a, stream)
                                     : launch_for_cache<kHeadDim, __half>(a, stream);
}

cudaError_t launch_for_head_size(const KernelArgs& a, int kernel_head_size, cudaStream_t stream) {
  switch (kernel_head_size) {
#if PAGEDATTN_HEAD_SIZE_64_BUILT
    case 64: return launch_for_dtype<64>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_80_BUILT
    case 80: return launch_for_dtype<80>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_96_BUILT
    case 96: return launch_for_dtype<96>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_128_BUILT
    case 128: return launch_for_dtype<128>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_192_BUILT
    case 192: return launch_for_dtype<192>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_256_BUILT
    case 256: return launch_for_dtype<256>(a, stream);
#endif
#if PAGEDATTN_HEAD_SIZE_512_BUILT
    case 512: return launch_for_dtype<512>(a, stream);
#endif
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace
}  // namespace attention

namespace detail {

Status launch_paged_attention_cuda(const PagedAttentionParams& params, int kernel_head_size,
                                   void* stream) {
  attention::KernelArgs a;
  a.p = params;
  a.group = params.num_heads / params.num_kv_heads;
  a.dchunks = kernel_head_size > 256 ? kernel_head_size / 256 : 1;
  a.write_split = params.max_num_splits > 1;
  a.block_stride = static_cast<int>(params.cache_block_stride);
  a.kv_stride = static_cast<int>(params.cache_kv_stride);
  a.token_stride = static_cast<int>(params.cache_token_stride);
  a.head_stride = static_cast<int>(params.cache_head_stride);
  a.fp8_wide_copies = dtype_size(params.cache_dtype) == 1 &&
                      reinterpret_cast<uintptr_t>(params.kv_cache) % 16 == 0 &&
                      params.cache_block_stride % 16 == 0 && params.cache_kv_stride % 16 == 0 &&
                      params.cache_token_stride % 16 == 0 && params.cache_head_stride % 16 == 0 &&
                      params.head_size % 16 == 0;
  if ((params.block_size & (params.block_size - 1)) == 0) {
    a.block_shift = __builtin_ctz(static_cast<unsigned>(params.block_size));
  }
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  cudaError_t err = attention::launch_for_head_size(a, kernel_head_size, cuda_stream);
  if (err == cudaSuccess && a.write_split) {
    err = params.q_dtype == DType::kBF16
              ? attention::launch_split_combine<__nv_bfloat16>(params, cuda_stream)
              : attention::launch_split_combine<__half>(params, cuda_stream);
  }
  if (err != cudaSuccess) {
    return Status(StatusCode::kCudaError,
                  std::string("paged attention launch failed: ") + cudaGetErrorString(err));
  }
  return ok_status();
}

}  // namespace detail
}  // namespace pagedattn::kernels
