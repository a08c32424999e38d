// Host interface of the CUDA merge_attn_states kernel; ops/merge_attn_states.cc dispatches here for
// CUDA tensors after validating them.
#pragma once

#include <cstdint>

#include "pagedattn/tensor.h"

namespace pagedattn::kernels {

Status launch_merge_attn_states(const TensorView& output, const TensorView& prefix_output,
                                const TensorView& prefix_lse, const TensorView& suffix_output,
                                const TensorView& suffix_lse, const TensorView& output_lse,
                                int64_t prefix_num_tokens, void* stream);

}  // namespace pagedattn::kernels
