// Internal: the CUDA side of launch_paged_attention (paged_attention_launch.cu), called by the host
// launcher after validation. Host-only header.
#pragma once

#include "kernels/attention/paged_attention.h"

namespace pagedattn::kernels::detail {

// Picks the instantiation for params (already validated) and launches the attention kernel and,
// with max_num_splits > 1, the split combine. stream: cudaStream_t.
Status launch_paged_attention_cuda(const PagedAttentionParams& params, int kernel_head_size,
                                   void* stream);

}  // namespace pagedattn::kernels::detail
