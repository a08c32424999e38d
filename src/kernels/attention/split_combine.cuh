// Split-KV combine, for any kernel generation that writes split partials: merges the
// max_num_splits partials of every (token, head) into out/lse with merge_attn_states' math
// (natural-log LSE weights; empty splits have LSE -inf), adding the sink as one more part with
// zero output. Tokens past the last request (graph padding) are skipped.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"

namespace pagedattn::kernels::attention {

template <typename T>
cudaError_t launch_split_combine(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace pagedattn::kernels::attention
