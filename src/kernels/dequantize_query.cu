// dequantize_fp8_query on the GPU: one thread per pack of 8 e4m3 values of one (token, head) row
// (one 8-byte load, one 16-byte store; PyTorch's float8 cast reaches about a quarter of the
// bandwidth), or per value where the strides do not allow packs. A scale per (request, KV head)
// finds the token's request by binary search in cu_seqlens_q.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "common/float_elements.cuh"
#include "device/fp8.cuh"
#include "kernels/dequantize_query.h"
#include "runtime/check.h"

namespace pagedattn::kernels {
namespace {

constexpr int kThreads = 256;

struct DequantizeArgs {
  const uint8_t* query;
  void* out;
  int64_t query_token_stride, query_head_stride, query_dim_stride;
  int64_t out_token_stride, out_head_stride, out_dim_stride;
  int64_t num_tokens, num_heads, head_size;
  const float* scale;  // nullptr: 1
  int64_t scale_req_stride, scale_head_stride;
  const int32_t* cu_seqlens_q;  // nullptr: one scale for every token
  int num_reqs, heads_per_kv_head;
};

// The request of `token`: the last r with cu_seqlens_q[r] <= token, clamped to [0, num_reqs).
__device__ int request_of(const int32_t* cu, int num_reqs, int64_t token) {
  int lo = 0, hi = num_reqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= token) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

template <typename T, int kPack>
__global__ void __launch_bounds__(kThreads) dequantize_fp8_query_kernel(DequantizeArgs a) {
  const int64_t packs_per_row = a.head_size / kPack;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= a.num_tokens * a.num_heads * packs_per_row) return;
  const int64_t d0 = (index % packs_per_row) * kPack;
  const int64_t head = (index / packs_per_row) % a.num_heads;
  const int64_t token = index / (packs_per_row * a.num_heads);
  float scale = 1.0f;
  if (a.scale != nullptr) {
    const int req = a.cu_seqlens_q == nullptr ? 0 : request_of(a.cu_seqlens_q, a.num_reqs, token);
    scale = a.scale[req * a.scale_req_stride + (head / a.heads_per_kv_head) * a.scale_head_stride];
  }
  const uint8_t* in =
      a.query + token * a.query_token_stride + head * a.query_head_stride + d0 * a.query_dim_stride;
  T* out = static_cast<T*>(a.out) + token * a.out_token_stride + head * a.out_head_stride +
           d0 * a.out_dim_stride;
  alignas(8) uint8_t bits[kPack];
  alignas(16) T res[kPack];
  if constexpr (kPack == 8) {
    *reinterpret_cast<uint2*>(bits) = *reinterpret_cast<const uint2*>(in);
  } else {
    bits[0] = in[0];
  }
#pragma unroll
  for (int e = 0; e < kPack; ++e) {
    res[e] = element_from_float<T>(device::fp8_to_float<device::Fp8Format::kE4M3>(bits[e]) * scale);
  }
  if constexpr (kPack == 8) {
    *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(res);
  } else {
    out[0] = res[0];
  }
}

bool aligned(const void* p, std::initializer_list<int64_t> strides, int64_t elem_bytes,
             int64_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  for (int64_t s : strides) {
    if ((s * elem_bytes) % bytes != 0) return false;
  }
  return true;
}

template <typename T>
Status launch_typed(const DequantizeArgs& a, cudaStream_t stream) {
  const bool packs = a.head_size % 8 == 0 && a.query_dim_stride == 1 && a.out_dim_stride == 1 &&
                     aligned(a.query, {a.query_token_stride, a.query_head_stride}, 1, 8) &&
                     aligned(a.out, {a.out_token_stride, a.out_head_stride}, sizeof(T), 16);
  const int64_t threads = a.num_tokens * a.num_heads * (a.head_size / (packs ? 8 : 1));
  if (threads == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (packs) {
    dequantize_fp8_query_kernel<T, 8><<<grid, kThreads, 0, stream>>>(a);
  } else {
    dequantize_fp8_query_kernel<T, 1><<<grid, kThreads, 0, stream>>>(a);
  }
  return runtime::check_launch("dequantize_fp8_query_kernel");
}

}  // namespace

Status launch_dequantize_fp8_query(const TensorView& output, const TensorView& query,
                                   const TensorView& scale, const TensorView& cu_seqlens_q,
                                   void* stream) {
  DequantizeArgs a{};
  a.query = query.data_as<const uint8_t>();
  a.out = output.data();
  a.query_token_stride = query.stride(0);
  a.query_head_stride = query.stride(1);
  a.query_dim_stride = query.stride(2);
  a.out_token_stride = output.stride(0);
  a.out_head_stride = output.stride(1);
  a.out_dim_stride = output.stride(2);
  a.num_tokens = query.size(0);
  a.num_heads = query.size(1);
  a.head_size = query.size(2);
  a.heads_per_kv_head = 1;
  if (scale.defined()) {
    a.scale = scale.data_as<const float>();
    if (scale.rank() == 2) {
      a.scale_req_stride = scale.stride(0);
      a.scale_head_stride = scale.stride(1);
      a.heads_per_kv_head = static_cast<int>(a.num_heads / scale.size(1));
      a.cu_seqlens_q = cu_seqlens_q.data_as<const int32_t>();
      a.num_reqs = static_cast<int>(scale.size(0));
    }
  }
  auto s = static_cast<cudaStream_t>(stream);
  return output.dtype() == DType::kF16 ? launch_typed<__half>(a, s)
                                       : launch_typed<__nv_bfloat16>(a, s);
}

}  // namespace pagedattn::kernels
