// Host interface of the CUDA kernel behind dequantize_fp8_query (ops/dequantize_fp8_query.cc
// validates the tensors, then dispatches here for CUDA ones).
#pragma once

#include "pagedattn/tensor.h"

namespace pagedattn::kernels {

Status launch_dequantize_fp8_query(const TensorView& output, const TensorView& query,
                                   const TensorView& scale, const TensorView& cu_seqlens_q,
                                   void* stream);

}  // namespace pagedattn::kernels
