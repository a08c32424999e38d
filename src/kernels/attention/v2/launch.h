// Internal: the v2 generation's launcher (v2/launch.cu), called by launch_paged_attention after
// validation. Host-only header.
#pragma once

#include "kernels/attention/paged_attention.h"

namespace pagedattn::kernels::detail {

// Picks the v2 instantiation for params (already validated) and launches the attention kernel
// and, with max_num_splits > 1, the split combine. stream: cudaStream_t.
Status launch_paged_attention_v2(const PagedAttentionParams& params, int kernel_head_size,
                                 void* stream);

}  // namespace pagedattn::kernels::detail
