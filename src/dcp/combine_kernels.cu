// The device combine's kernels: grid-stride loops over one element each, the LSE rule of
// lse_weights.cuh recomputed per element from the row's N LSEs (N is small; the row's LSEs stay in
// L1), so that host and device combine with the same arithmetic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "dcp/combine_kernels.h"
#include "common/float_elements.cuh"
#include "dcp/lse_weights.cuh"
#include "runtime/check.h"

namespace pagedattn::dcp {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // enough to fill any GPU; the loops stride past it

dim3 grid_for(int64_t elements) {
  return dim3(static_cast<unsigned>(
      std::clamp<int64_t>((elements + kThreads - 1) / kThreads, 1, kMaxBlocks)));
}

struct Strided3 {  // a [T, H, D] view: data and strides in elements
  const void* data;
  int64_t s0, s1, s2;
};
struct Strided2 {  // a [H, T] f32 view
  float* data;
  int64_t s0, s1;
};

Strided3 strided3(const TensorView& t) {
  return {t.data(), t.stride(0), t.stride(1), t.stride(2)};
}
Strided2 strided2(const TensorView& t) {
  return {t.data_as<float>(), t.stride(0), t.stride(1)};
}

struct Geometry {
  int64_t tokens, heads, dim, heads_per_rank;
};
Geometry geometry(const CombineShape& s) {
  return {s.num_tokens, s.num_heads, s.head_size, s.heads_per_rank};
}

// Offset of (slice, t, head in slice, d) in a [N, T, H / N, D] packed buffer.
__device__ __forceinline__ int64_t packed_at(const Geometry& g, int64_t slice, int64_t t,
                                             int64_t head_in_slice, int64_t d) {
  return ((slice * g.tokens + t) * g.heads_per_rank + head_in_slice) * g.dim + d;
}

// Elements are moved as raw bits of their size: packing changes no value.
template <typename Bits>
__global__ void __launch_bounds__(kThreads)
    pack_partials_kernel(Geometry g, Strided3 out, Strided2 lse, Bits* packed_out,
                         float* packed_lse) {
  const int64_t columns = packed_out != nullptr ? g.dim : 1;
  const int64_t total = g.tokens * g.heads * columns;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = i % columns, h = (i / columns) % g.heads, t = i / (columns * g.heads);
    if (packed_out != nullptr) {
      packed_out[packed_at(g, h / g.heads_per_rank, t, h % g.heads_per_rank, d)] =
          static_cast<const Bits*>(out.data)[t * out.s0 + h * out.s1 + d * out.s2];
    }
    if (d == 0) packed_lse[h * g.tokens + t] = lse.data[h * lse.s0 + t * lse.s1];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ag_rs_scale_kernel(Geometry g, int world_size, int rank, Strided3 out, const float* all_lse,
                       T* scaled, Strided2 out_lse) {
  const int64_t total = g.tokens * g.heads * g.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = i % g.dim, h = (i / g.dim) % g.heads, t = i / (g.dim * g.heads);
    const DeviceLseWeights row(all_lse + h * g.tokens + t, g.heads * g.tokens, world_size);
    const float w = row.weight(rank);
    // A rank that adds nothing sends exact zeros, whatever its output holds.
    const T x = static_cast<const T*>(out.data)[t * out.s0 + h * out.s1 + d * out.s2];
    const float value = w == 0.0f ? 0.0f : __fmul_rn(w, element_to_float(x));
    const int64_t slice = h / g.heads_per_rank, head_in_slice = h % g.heads_per_rank;
    scaled[packed_at(g, slice, t, head_in_slice, d)] = element_from_float<T>(value);
    if (slice == rank && d == 0) {
      out_lse.data[head_in_slice * out_lse.s0 + t * out_lse.s1] = row.lse();
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    a2a_reduce_kernel(Geometry g, int world_size, const T* recv_out, const float* recv_lse, T* out,
                      Strided2 out_lse) {
  const int64_t total = g.tokens * g.heads_per_rank * g.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = i % g.dim, hl = (i / g.dim) % g.heads_per_rank;
    const int64_t t = i / (g.dim * g.heads_per_rank);
    const DeviceLseWeights row(recv_lse + hl * g.tokens + t, g.heads_per_rank * g.tokens,
                               world_size);
    float value = 0.0f;
    for (int s = 0; s < world_size; ++s) {
      const float w = row.weight(s);
      if (w == 0.0f) continue;  // an empty rank adds nothing, not even its NaN
      value = __fadd_rn(value, __fmul_rn(w, element_to_float(recv_out[packed_at(g, s, t, hl, d)])));
    }
    out[(t * g.heads_per_rank + hl) * g.dim + d] = element_from_float<T>(value);
    if (d == 0) out_lse.data[hl * out_lse.s0 + t * out_lse.s1] = row.lse();
  }
}

// Runs body.template operator()<T>() with T the element type of `dtype` (f32, f16, bf16).
template <typename Body>
Status for_dtype(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kF32: return body.template operator()<float>();
    case DType::kF16: return body.template operator()<__half>();
    case DType::kBF16: return body.template operator()<__nv_bfloat16>();
    default:
      return invalid_argument("the DCP combine moves f32, f16 or bf16; got " +
                              std::string(dtype_name(dtype)));
  }
}

}  // namespace

Status launch_pack_partials(const CombineShape& shape, const TensorView& partial_out,
                            const TensorView& partial_lse, void* packed_out, float* packed_lse,
                            void* stream) {
  const Geometry g = geometry(shape);
  const int64_t columns = packed_out != nullptr ? g.dim : 1;
  const dim3 grid = grid_for(g.tokens * g.heads * columns);
  const auto s = static_cast<cudaStream_t>(stream);
  if (dtype_size(partial_out.dtype()) == 4) {
    pack_partials_kernel<uint32_t>
        <<<grid, kThreads, 0, s>>>(g, strided3(partial_out), strided2(partial_lse),
                                   static_cast<uint32_t*>(packed_out), packed_lse);
  } else {
    pack_partials_kernel<uint16_t>
        <<<grid, kThreads, 0, s>>>(g, strided3(partial_out), strided2(partial_lse),
                                   static_cast<uint16_t*>(packed_out), packed_lse);
  }
  return runtime::check_launch("pack_partials_kernel");
}

Status launch_ag_rs_scale(const CombineShape& shape, int world_size, int rank,
                          const TensorView& partial_out, const float* all_lse, void* scaled,
                          const TensorView& out_lse, void* stream) {
  const Geometry g = geometry(shape);
  const dim3 grid = grid_for(g.tokens * g.heads * g.dim);
  return for_dtype(partial_out.dtype(), [&]<typename T>() {
    ag_rs_scale_kernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        g, world_size, rank, strided3(partial_out), all_lse, static_cast<T*>(scaled),
        strided2(out_lse));
    return runtime::check_launch("ag_rs_scale_kernel");
  });
}

Status launch_a2a_reduce(const CombineShape& shape, int world_size, const void* recv_out,
                         const float* recv_lse, const TensorView& out, const TensorView& out_lse,
                         void* stream) {
  const Geometry g = geometry(shape);
  const dim3 grid = grid_for(g.tokens * g.heads_per_rank * g.dim);
  return for_dtype(out.dtype(), [&]<typename T>() {
    a2a_reduce_kernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        g, world_size, static_cast<const T*>(recv_out), recv_lse, out.data_as<T>(),
        strided2(out_lse));
    return runtime::check_launch("a2a_reduce_kernel");
  });
}

}  // namespace pagedattn::dcp
