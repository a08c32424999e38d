// Internal: the decode family's split combine (decode_combine.cu).
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode/decode_attention.h"
#include "kernels/decode/decode_work.h"

namespace pagedattn::kernels::decode {

template <typename T>
cudaError_t launch_decode_combine(const DecodeAttentionParams& p, int group, cudaStream_t stream);

}  // namespace pagedattn::kernels::decode
