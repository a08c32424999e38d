// Internal: the CUDA side of the decode launcher (decode/launch.cu), called by the host code in
// decode_attention.cc after validation. Host-only header.
#pragma once

#include "kernels/decode/decode_attention.h"

namespace pagedattn::kernels::detail {

Status launch_decode_attention_cuda(const DecodeAttentionParams& params, int kernel_head_size,
                                    void* stream);
int decode_ctas_per_sm_cuda(int kernel_head_size, DType q_dtype, DType cache_dtype);

}  // namespace pagedattn::kernels::detail
