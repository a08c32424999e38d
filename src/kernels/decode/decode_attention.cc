// Host side of the decode launcher: which head sizes have a decode kernel, and validation of what
// the kernel cannot serve, with messages that name the parameter and the allowed values.
#include "kernels/decode/decode_attention.h"

#include <cstdint>
#include <string>

#include "kernels/attention/paged_attention.h"
#include "kernels/operand_checks.h"
#include "pagedattn/config.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/decode/dispatch.h"
#endif

namespace pagedattn::kernels {
namespace {

Status validate_buffers(const DecodeAttentionParams& p) {
  if (p.plan == nullptr || p.num_ctas <= 0 || p.partial_out == nullptr ||
      p.partial_lse == nullptr || !aligned(p.partial_out, 16) || !aligned(p.plan, 16)) {
    return invalid_argument("decode attention: plan (16-byte aligned), num_ctas > 0 (got " +
                            std::to_string(p.num_ctas) +
                            "), partial_out (16-byte aligned) and partial_lse are required");
  }
  if (p.q == nullptr || p.out == nullptr || p.block_table == nullptr || p.k_cache == nullptr ||
      p.v_cache == nullptr) {
    return invalid_argument(
        "decode attention: q, out, block_table, k_cache and v_cache are required");
  }
  return check_operand_layout("decode attention", p);
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
    return unimplemented("decode attention: head_size " + std::to_string(params.head_size) +
                         " has no decode kernel in this build (multiples of 8 up to the largest "
                         "of the built head sizes <= " +
                         std::to_string(kMaxDecodeHeadSize) + ": " + PAGEDATTN_HEAD_SIZES + ")");
  }
  PAGEDATTN_RETURN_IF_ERROR(check_layer_fields("decode attention", params));
  if (Status s = validate_buffers(params); !s.ok()) return s;
#if PAGEDATTN_WITH_CUDA
  return detail::launch_decode_attention_cuda(params, kernel_head_size, stream);
#else
  (void)stream;
  return unimplemented("decode attention: this build has no CUDA");
#endif
}

}  // namespace pagedattn::kernels
