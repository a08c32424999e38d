// merge_attn_states on the GPU (the semantics of vLLM's csrc/attention/merge_attn_states.cu): one
// thread per 16-byte pack of one (token, head) row. +inf and -inf LSEs both mean "no keys"; two
// empty sides give the prefix output and -inf; tokens at or past prefix_num_tokens copy the suffix.
// A side with weight 0 is not read into the sum (0 * inf would be NaN), as in the CPU version. A NaN
// LSE is not sanitised (it propagates, as in vLLM), which is why this does not use
// device::merge_weights, whose empty test also swallows NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "common/float_elements.cuh"
#include "kernels/merge_states.h"
#include "runtime/check.h"

namespace pagedattn::kernels {
namespace {

constexpr int kThreads = 128;

struct Rows {  // [T, H, D] with a contiguous head dim; strides in elements
  void* data;
  int64_t token_stride, head_stride;
};
struct Lse {  // [H, T] float32
  float* data;
  int64_t head_stride, token_stride;
};

struct MergeArgs {
  Rows out, prefix, suffix;
  Lse prefix_lse, suffix_lse, out_lse;  // out_lse.data may be nullptr
  int64_t num_tokens, num_heads, head_size, prefix_num_tokens;
};

template <typename T, int kPack>
__global__ void __launch_bounds__(kThreads) merge_states_kernel(MergeArgs a) {
  const int64_t packs_per_row = a.head_size / kPack;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= a.num_tokens * a.num_heads * packs_per_row) return;
  const int64_t pack = index % packs_per_row;
  const int64_t head = (index / packs_per_row) % a.num_heads;
  const int64_t token = index / (packs_per_row * a.num_heads);

  const float s_raw = a.suffix_lse.data[head * a.suffix_lse.head_stride + token * a.suffix_lse.token_stride];
  float lse, pw, sw;
  if (token >= a.prefix_num_tokens) {
    lse = s_raw;
    pw = 0.0f;
    sw = 1.0f;
  } else {
    float p = a.prefix_lse.data[head * a.prefix_lse.head_stride + token * a.prefix_lse.token_stride];
    float s = s_raw;
    if (isinf(p)) p = -INFINITY;
    if (isinf(s)) s = -INFINITY;
    const float m = fmaxf(p, s);
    if (isinf(m)) {
      lse = m;
      pw = 1.0f;
      sw = 0.0f;
    } else {
      const float pe = expf(p - m), se = expf(s - m), sum = pe + se;
      lse = logf(sum) + m;
      pw = pe / sum;
      sw = se / sum;
    }
  }

  const int64_t d0 = pack * kPack;
  const T* prefix = static_cast<const T*>(a.prefix.data) + token * a.prefix.token_stride +
                    head * a.prefix.head_stride + d0;
  const T* suffix = static_cast<const T*>(a.suffix.data) + token * a.suffix.token_stride +
                    head * a.suffix.head_stride + d0;
  T* out = static_cast<T*>(a.out.data) + token * a.out.token_stride + head * a.out.head_stride + d0;
  alignas(16) T p_in[kPack];
  alignas(16) T s_in[kPack];
  alignas(16) T res[kPack];
  if constexpr (sizeof(p_in) == 16) {
    if (pw != 0.0f) *reinterpret_cast<uint4*>(p_in) = *reinterpret_cast<const uint4*>(prefix);
    if (sw != 0.0f) *reinterpret_cast<uint4*>(s_in) = *reinterpret_cast<const uint4*>(suffix);
  } else {
#pragma unroll
    for (int e = 0; e < kPack; ++e) {
      if (pw != 0.0f) p_in[e] = prefix[e];
      if (sw != 0.0f) s_in[e] = suffix[e];
    }
  }
#pragma unroll
  for (int e = 0; e < kPack; ++e) {
    float v = 0.0f;
    if (pw != 0.0f) v += pw * element_to_float(p_in[e]);
    if (sw != 0.0f) v += sw * element_to_float(s_in[e]);
    res[e] = element_from_float<T>(v);
  }
  if constexpr (sizeof(res) == 16) {
    *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(res);
  } else {
#pragma unroll
    for (int e = 0; e < kPack; ++e) out[e] = res[e];
  }
  if (pack == 0 && a.out_lse.data != nullptr) {
    a.out_lse.data[head * a.out_lse.head_stride + token * a.out_lse.token_stride] = lse;
  }
}

bool vector_ok(const void* p, std::initializer_list<int64_t> strides, size_t elem) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  for (int64_t s : strides) {
    if ((s * static_cast<int64_t>(elem)) % 16 != 0) return false;
  }
  return true;
}

template <typename T>
Status launch_typed(const MergeArgs& args, cudaStream_t stream) {
  constexpr int kVecPack = 16 / sizeof(T);
  const bool vec = args.head_size % kVecPack == 0 &&
                   vector_ok(args.out.data, {args.out.token_stride, args.out.head_stride}, sizeof(T)) &&
                   vector_ok(args.prefix.data, {args.prefix.token_stride, args.prefix.head_stride}, sizeof(T)) &&
                   vector_ok(args.suffix.data, {args.suffix.token_stride, args.suffix.head_stride}, sizeof(T));
  const int pack = vec ? kVecPack : 1;
  const int64_t threads = args.num_tokens * args.num_heads * (args.head_size / pack);
  if (threads == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (vec) {
    merge_states_kernel<T, kVecPack><<<grid, kThreads, 0, stream>>>(args);
  } else {
    merge_states_kernel<T, 1><<<grid, kThreads, 0, stream>>>(args);
  }
  return runtime::check_launch("merge_states_kernel");
}

Rows rows_of(const TensorView& t) { return {t.data(), t.stride(0), t.stride(1)}; }
Lse lse_of(const TensorView& t) {
  if (!t.defined()) return {nullptr, 0, 0};
  return {t.data_as<float>(), t.stride(0), t.stride(1)};
}

}  // namespace

Status launch_merge_attn_states(const TensorView& output, const TensorView& prefix_output,
                                const TensorView& prefix_lse, const TensorView& suffix_output,
                                const TensorView& suffix_lse, const TensorView& output_lse,
                                int64_t prefix_num_tokens, void* stream) {
  // ops/merge_attn_states.cc validates shapes for callers of the public op; these are the
  // conditions this kernel itself relies on.
  for (const TensorView* t : {&output, &prefix_output, &suffix_output}) {
    if (t->rank() != 3 || t->dtype() != output.dtype() || t->stride(2) != 1 ||
        t->size(0) != output.size(0) || t->size(1) != output.size(1) || t->size(2) != output.size(2) ||
        !t->device().is_cuda()) {
      return invalid_argument("merge_attn_states (CUDA): " + t->describe() + " does not match output " +
                              output.describe() + " with a contiguous head dim on a CUDA device");
    }
  }
  for (const TensorView* t : {&prefix_lse, &suffix_lse, &output_lse}) {
    if (t == &output_lse && !t->defined()) continue;
    if (t->rank() != 2 || t->dtype() != DType::kF32 || t->size(0) != output.size(1) ||
        t->size(1) != output.size(0)) {
      return invalid_argument("merge_attn_states (CUDA): LSE " + t->describe() +
                              " is not f32 [num_heads, num_tokens] for output " + output.describe());
    }
  }
  MergeArgs args{rows_of(output), rows_of(prefix_output), rows_of(suffix_output),
                 lse_of(prefix_lse), lse_of(suffix_lse), lse_of(output_lse),
                 output.size(0), output.size(1), output.size(2), prefix_num_tokens};
  runtime::ScopedDevice guard(output.device().index);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  const auto s = static_cast<cudaStream_t>(stream);
  switch (output.dtype()) {
    case DType::kF32: return launch_typed<float>(args, s);
    case DType::kF16: return launch_typed<__half>(args, s);
    case DType::kBF16: return launch_typed<__nv_bfloat16>(args, s);
    default:
      return invalid_argument("merge_attn_states (CUDA): output dtype " +
                              std::string(dtype_name(output.dtype())) + "; expected f32, f16 or bf16");
  }
}

}  // namespace pagedattn::kernels
