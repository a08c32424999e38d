// Float rows of a pass for a merge (cascade, DCP), and the merge stored into the output.
#pragma once

#include <cstdint>

#include "backends/cpu/attention_kernel.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu {

// Points a pass's output at float32 rows [num_tokens, pass heads, D] and LSE [pass heads,
// num_tokens], for a merge to read (cascade, DCP).
void redirect_to_float_rows(AttentionPass& pass, float* out, float* lse, int64_t num_tokens);

// merge_attn_states of two passes over disjoint keys, each as float32 rows [num_tokens, heads,
// dim] and LSE [heads, num_tokens], stored straight into output [T, heads, dim] (its dtype and
// strides) and, when defined, output_lse [heads, T] (cascade, DCP); tokens run on the thread pool.
struct FloatRows {
  const float* rows;
  const float* lse;
};
void store_merged_rows(FloatRows prefix, FloatRows suffix, int64_t num_tokens, int64_t heads,
                       int64_t dim, const TensorView& output, const TensorView& output_lse);

}  // namespace pagedattn::cpu
