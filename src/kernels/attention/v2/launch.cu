// The v2 generation's launcher: picks the instantiation (head size, query dtype, cache kind) for
// validated parameters and launches it, then the split combine.
#include "kernels/attention/v2/launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/mask.h"
#include "kernels/attention/head_sizes.h"
#include "kernels/attention/split_combine.cuh"
#include "kernels/attention/v2/traits.cuh"

namespace pagedattn::kernels {
namespace attention::v2 {

// Defined by the generated instantiations/*.cu files.
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_paged_attention_instance(const KernelArgs& a, cudaStream_t stream);

namespace {

template <int kHeadDim, typename T, CacheKind k16Bit>
cudaError_t launch_for_cache(const KernelArgs& a, cudaStream_t stream) {
  switch (cache_kind(a.p.cache_dtype)) {
    case CacheKind::kFp8E4M3:
      return launch_paged_attention_instance<kHeadDim, T, CacheKind::kFp8E4M3>(a, stream);
    case CacheKind::kFp8E5M2:
      return launch_paged_attention_instance<kHeadDim, T, CacheKind::kFp8E5M2>(a, stream);
    default: return launch_paged_attention_instance<kHeadDim, T, k16Bit>(a, stream);
  }
}

template <int kHeadDim>
cudaError_t launch_for_dtype(const KernelArgs& a, cudaStream_t stream) {
  return a.p.q_dtype == DType::kBF16
             ? launch_for_cache<kHeadDim, __nv_bfloat16, CacheKind::kBF16>(a, stream)
             : launch_for_cache<kHeadDim, __half, CacheKind::kF16>(a, stream);
}

template <int... kSizes>
cudaError_t launch_for_head_size(HeadSizeList<kSizes...>, const KernelArgs& a, int kernel_head_size,
                                 cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  ((kernel_head_size == kSizes && (err = launch_for_dtype<kSizes>(a, stream), true)) || ...);
  return err;
}

}  // namespace
}  // namespace attention::v2

namespace detail {

Status launch_paged_attention_v2(const PagedAttentionParams& params, int kernel_head_size,
                                 void* stream) {
  using attention::v2::prefill_tile;
  using mask::soft_cap_applies;
  const int64_t max_rows =
      static_cast<int64_t>(params.max_query_len) * (params.num_heads / params.num_kv_heads);
  const int tile_rows = prefill_tile(kernel_head_size).rows();
  if ((max_rows + tile_rows - 1) / tile_rows > 65535) {
    return invalid_argument("paged attention: max_query_len " +
                            std::to_string(params.max_query_len) +
                            " times the GQA group exceeds the grid limit (65535 * " +
                            std::to_string(tile_rows) + " rows)");
  }
  attention::v2::KernelArgs a;
  a.p = params;
  if (!soft_cap_applies(params.softcap)) a.p.softcap = 0.0f;
  a.group = params.num_heads / params.num_kv_heads;
  a.dchunks = attention::v2::column_chunks(kernel_head_size);
  a.write_split = params.max_num_splits > 1;
  a.block_stride = static_cast<int>(params.cache_block_stride);
  a.token_stride = static_cast<int>(params.cache_token_stride);
  a.head_stride = static_cast<int>(params.cache_head_stride);
  a.new_token_stride = static_cast<int>(params.new_token_stride);
  a.new_head_stride = static_cast<int>(params.new_head_stride);
  a.new_v_delta = static_cast<int64_t>(reinterpret_cast<uintptr_t>(params.v_new) -
                                       reinterpret_cast<uintptr_t>(params.k_new));
  a.fp8_wide_copies = dtype_size(params.cache_dtype) == 1 &&
                      reinterpret_cast<uintptr_t>(params.k_cache) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(params.v_cache) % 16 == 0 &&
                      params.cache_block_stride % 16 == 0 && params.cache_token_stride % 16 == 0 &&
                      params.cache_head_stride % 16 == 0 && params.head_size % 16 == 0;
  if ((params.block_size & (params.block_size - 1)) == 0) {
    a.block_shift = __builtin_ctz(static_cast<unsigned>(params.block_size));
  }
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  cudaError_t err =
      attention::v2::launch_for_head_size(BuiltHeadSizes{}, a, kernel_head_size, cuda_stream);
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
