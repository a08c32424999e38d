// dequantize_fp8_query on the GPU: one thread per pack of 16 or 8 e4m3 values of one (token, head)
// row (one 16- or 8-byte load, 16-byte stores; PyTorch's float8 cast reaches about a quarter of the
// bandwidth), or per value where the strides do not allow packs. A scale per (request, KV head)
// finds the token's request by binary search in cu_seqlens_q.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

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

// Two e4m3 values (the low byte first) times `scale` as a pair of T: the hardware conversion to
// f16 is exact, so the product rounds once, as on the host.
template <typename T>
__device__ __forceinline__ uint32_t dequantize_pair(uint16_t bits, float scale) {
  const uint32_t h2 = device::fp8x2_to_half2<__half, device::Fp8Format::kE4M3>(bits);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
  const T lo = element_from_float<T>(f.x * scale), hi = element_from_float<T>(f.y * scale);
  return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&lo)) |
         static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&hi)) << 16;
}

// Index: uint32_t where every pack's index fits (no 64-bit division per thread), else int64_t.
template <typename T, int kPack, typename Index>
__global__ void __launch_bounds__(kThreads) dequantize_fp8_query_kernel(DequantizeArgs a) {
  const Index packs_per_row = static_cast<Index>(a.head_size / kPack);
  const Index heads = static_cast<Index>(a.num_heads);
  const Index index = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= static_cast<Index>(a.num_tokens) * heads * packs_per_row) return;
  const Index row = index / packs_per_row;
  const int64_t d0 = static_cast<int64_t>(index - row * packs_per_row) * kPack;
  const int64_t token = row / heads;
  const int64_t head = row - static_cast<Index>(token) * heads;
  float scale = 1.0f;
  if (a.scale != nullptr) {
    const int req = a.cu_seqlens_q == nullptr ? 0 : request_of(a.cu_seqlens_q, a.num_reqs, token);
    scale = a.scale[req * a.scale_req_stride + (head / a.heads_per_kv_head) * a.scale_head_stride];
  }
  const uint8_t* in =
      a.query + token * a.query_token_stride + head * a.query_head_stride + d0 * a.query_dim_stride;
  T* out = static_cast<T*>(a.out) + token * a.out_token_stride + head * a.out_head_stride +
           d0 * a.out_dim_stride;
  if constexpr (kPack == 1) {
    out[0] = element_from_float<T>(device::fp8_to_float<device::Fp8Format::kE4M3>(in[0]) * scale);
  } else {
    using Load = std::conditional_t<kPack == 16, uint4, uint2>;
    const Load packed = *reinterpret_cast<const Load*>(in);
    const auto* bits = reinterpret_cast<const uint16_t*>(&packed);
    alignas(16) uint32_t res[kPack / 2];
#pragma unroll
    for (int e = 0; e < kPack / 2; ++e) res[e] = dequantize_pair<T>(bits[e], scale);
#pragma unroll
    for (int e = 0; e < kPack / 8; ++e) {
      reinterpret_cast<uint4*>(out)[e] = reinterpret_cast<const uint4*>(res)[e];
    }
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

// The widest pack the head size, the strides and the addresses allow: 16 values (one 16-byte load,
// two 16-byte stores), 8, or single values.
int pack_width(const DequantizeArgs& a, int64_t elem_bytes) {
  if (a.query_dim_stride != 1 || a.out_dim_stride != 1) return 1;
  for (int pack : {16, 8}) {
    if (a.head_size % pack == 0 &&
        aligned(a.query, {a.query_token_stride, a.query_head_stride}, 1, pack) &&
        aligned(a.out, {a.out_token_stride, a.out_head_stride}, elem_bytes, 16)) {
      return pack;
    }
  }
  return 1;
}

template <typename T, int kPack>
void launch_pack(const DequantizeArgs& a, int64_t threads, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (threads + kThreads <= INT32_MAX) {
    dequantize_fp8_query_kernel<T, kPack, uint32_t><<<grid, kThreads, 0, stream>>>(a);
  } else {
    dequantize_fp8_query_kernel<T, kPack, int64_t><<<grid, kThreads, 0, stream>>>(a);
  }
}

template <typename T>
Status launch_typed(const DequantizeArgs& a, cudaStream_t stream) {
  const int pack = pack_width(a, sizeof(T));
  const int64_t threads = a.num_tokens * a.num_heads * (a.head_size / pack);
  if (threads == 0) return ok_status();
  if (pack == 16) {
    launch_pack<T, 16>(a, threads, stream);
  } else if (pack == 8) {
    launch_pack<T, 8>(a, threads, stream);
  } else {
    launch_pack<T, 1>(a, threads, stream);
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
