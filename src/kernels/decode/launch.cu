// Picks the decode instantiation for validated parameters and launches it; its CTAs merge the
// split segments (decode/split_merge.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/attention/head_sizes.h"
#include "kernels/decode/dispatch.h"
#include "kernels/decode/traits.cuh"

namespace pagedattn::kernels {
namespace decode {

// Defined by the generated decode_hd<N>_*.cu files.
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_decode_instance(const DecodeArgs& a, cudaStream_t stream);
template <int kHeadDim, typename T, CacheKind kCache>
int decode_instance_ctas_per_sm();

namespace {

// Calls f.operator()<head size, T, cache kind>() for the runtime values; `fallback` when the head
// size has no decode instantiation (those above 256 are served by the paged attention family).
template <int kHeadDim, typename T, CacheKind k16Bit, typename F, typename R>
R with_cache(DType cache, const F& f) {
  switch (cache_kind(cache)) {
    case CacheKind::kFp8E4M3: return f.template operator()<kHeadDim, T, CacheKind::kFp8E4M3>();
    case CacheKind::kFp8E5M2: return f.template operator()<kHeadDim, T, CacheKind::kFp8E5M2>();
    default: return f.template operator()<kHeadDim, T, k16Bit>();
  }
}

template <int kHeadDim, typename F, typename R>
R with_dtype(DType q, DType cache, const F& f) {
  return q == DType::kBF16 ? with_cache<kHeadDim, __nv_bfloat16, CacheKind::kBF16, F, R>(cache, f)
                           : with_cache<kHeadDim, __half, CacheKind::kF16, F, R>(cache, f);
}

template <typename R, typename F, int kSize>
void with_size(int head_size, DType q, DType cache, const F& f, R& result) {
  if constexpr (kSize <= kMaxDecodeHeadSize) {
    if (head_size == kSize) result = with_dtype<kSize, F, R>(q, cache, f);
  }
}

template <typename R, typename F, int... kSizes>
R with_instance(HeadSizeList<kSizes...>, int head_size, DType q, DType cache, R fallback, F f) {
  R result = fallback;
  (with_size<R, F, kSizes>(head_size, q, cache, f, result), ...);
  return result;
}

struct LaunchInstance {
  const DecodeArgs& args;
  cudaStream_t stream;
  template <int kHeadDim, typename T, CacheKind kCache>
  cudaError_t operator()() const {
    return launch_decode_instance<kHeadDim, T, kCache>(args, stream);
  }
};

struct InstanceOccupancy {
  template <int kHeadDim, typename T, CacheKind kCache>
  int operator()() const {
    return decode_instance_ctas_per_sm<kHeadDim, T, kCache>();
  }
};

}  // namespace
}  // namespace decode

namespace detail {

Status launch_decode_attention_cuda(const DecodeAttentionParams& params, int kernel_head_size,
                                    void* stream) {
  const decode::DecodeArgs a = decode::make_decode_args(params);
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  const cudaError_t err =
      decode::with_instance(BuiltHeadSizes{}, kernel_head_size, params.q_dtype, params.cache_dtype,
                            cudaErrorInvalidValue, decode::LaunchInstance{a, cuda_stream});
  if (err != cudaSuccess) {
    return Status(StatusCode::kCudaError,
                  std::string("decode attention launch failed: ") + cudaGetErrorString(err));
  }
  return ok_status();
}

int decode_ctas_per_sm_cuda(int kernel_head_size, DType q_dtype, DType cache_dtype) {
  return decode::with_instance(BuiltHeadSizes{}, kernel_head_size, q_dtype, cache_dtype, 0,
                               decode::InstanceOccupancy{});
}

}  // namespace detail
}  // namespace pagedattn::kernels
