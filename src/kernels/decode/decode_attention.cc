// Host side of the decode launcher: which head sizes have a decode kernel, and validation of what
// the kernel cannot serve, with messages that name the parameter and the allowed values.
#include "kernels/decode/decode_attention.h"

#include <cstdint>
#include <string>

#include "kernels/attention/paged_attention.h"
#include "pagedattn/config.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/decode/decode_dispatch.h"
#endif

namespace pagedattn::kernels {
namespace {

bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

std::string str(int64_t v) { return std::to_string(v); }

Status validate_types(const DecodeAttentionParams& p) {
  if (p.q_dtype != DType::kF16 && p.q_dtype != DType::kBF16) {
    return invalid_argument("decode attention: q_dtype " + std::string(dtype_name(p.q_dtype)) +
                            " is not supported (allowed: f16, bf16)");
  }
  const bool fp8 = is_fp8(p.cache_dtype);
  if (!fp8 && p.cache_dtype != p.q_dtype) {
    return invalid_argument("decode attention: cache_dtype " +
                            std::string(dtype_name(p.cache_dtype)) + " must equal q_dtype " +
                            std::string(dtype_name(p.q_dtype)) + " or be fp8_e4m3/fp8_e5m2");
  }
  if (fp8 && (p.k_scale == nullptr || p.v_scale == nullptr)) {
    return invalid_argument("decode attention: an FP8 cache needs k_scale and v_scale");
  }
  if (p.num_kv_heads <= 0 || p.num_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return invalid_argument("decode attention: num_heads " + str(p.num_heads) +
                            " must be a positive multiple of num_kv_heads " + str(p.num_kv_heads));
  }
  if (p.block_size <= 0 || p.block_size % 16 != 0) {
    return invalid_argument("decode attention: block_size " + str(p.block_size) +
                            " must be a positive multiple of 16");
  }
  return ok_status();
}

Status validate_buffers(const DecodeAttentionParams& p) {
  if (p.plan == nullptr || p.num_ctas <= 0 || p.partial_out == nullptr ||
      p.partial_lse == nullptr || !aligned(p.partial_out, 16) || !aligned(p.plan, 16)) {
    return invalid_argument("decode attention: plan (16-byte aligned), num_ctas > 0 (got " +
                            str(p.num_ctas) +
                            "), partial_out (16-byte aligned) and partial_lse are required");
  }
  if (p.q == nullptr || p.out == nullptr || p.block_table == nullptr || p.kv_cache == nullptr) {
    return invalid_argument("decode attention: q, out, block_table and kv_cache are required");
  }
  const bool fp8 = is_fp8(p.cache_dtype);
  const int64_t strides[] = {p.cache_block_stride, p.cache_kv_stride, p.cache_token_stride,
                             p.cache_head_stride};
  bool cache_ok = aligned(p.kv_cache, fp8 ? 8 : 16);
  for (int64_t s : strides) cache_ok = cache_ok && s % 8 == 0 && s >= 0 && s <= INT32_MAX;
  const int64_t max_in_block = (p.block_size - 1) * p.cache_token_stride +
                               (p.num_kv_heads - 1) * p.cache_head_stride + p.cache_kv_stride +
                               p.head_size;
  if (!cache_ok || max_in_block > INT32_MAX) {
    return invalid_argument("decode attention: kv_cache must be 16-byte aligned (8 for FP8) with "
                            "non-negative strides that are multiples of 8 elements, below 2^31, "
                            "as is the largest offset inside a block (strides block " +
                            str(p.cache_block_stride) + ", kv " + str(p.cache_kv_stride) +
                            ", token " + str(p.cache_token_stride) + ", head " +
                            str(p.cache_head_stride) + ")");
  }
  if (!aligned(p.q, 16) || p.q_token_stride % 8 != 0 || p.q_head_stride % 8 != 0) {
    return invalid_argument(
        "decode attention: q must be 16-byte aligned with strides that are multiples of 8");
  }
  if (!aligned(p.out, 8) || p.out_token_stride % 4 != 0 || p.out_head_stride % 4 != 0) {
    return invalid_argument(
        "decode attention: out must be 8-byte aligned with strides that are multiples of 4");
  }
  return ok_status();
}

}  // namespace

// The paged attention family's choice (the next built size), when it has a decode kernel.
int decode_attention_kernel_head_size(int head_size) {
  const int kernel = paged_attention_kernel_head_size(head_size);
  return kernel <= kMaxDecodeHeadSize ? kernel : 0;
}

int decode_attention_ctas_per_sm(int head_size, DType q_dtype, DType cache_dtype) {
  const int kernel_head_size = decode_attention_kernel_head_size(head_size);
  if (kernel_head_size == 0) return 0;
#if PAGEDATTN_WITH_CUDA
  return detail::decode_ctas_per_sm_cuda(kernel_head_size, q_dtype, cache_dtype);
#else
  (void)q_dtype;
  (void)cache_dtype;
  return 0;
#endif
}

Status launch_decode_attention(const DecodeAttentionParams& params, void* stream) {
  const int kernel_head_size = decode_attention_kernel_head_size(params.head_size);
  if (kernel_head_size == 0) {
    return unimplemented("decode attention: head_size " + str(params.head_size) +
                         " has no decode kernel in this build (multiples of 8 up to the largest "
                         "of the built head sizes <= " + str(kMaxDecodeHeadSize) + ": " +
                         PAGEDATTN_HEAD_SIZES + ")");
  }
  if (Status s = validate_types(params); !s.ok()) return s;
  if (Status s = validate_buffers(params); !s.ok()) return s;
#if PAGEDATTN_WITH_CUDA
  return detail::launch_decode_attention_cuda(params, kernel_head_size, stream);
#else
  (void)stream;
  return unimplemented("decode attention: this build has no CUDA");
#endif
}

}  // namespace pagedattn::kernels
