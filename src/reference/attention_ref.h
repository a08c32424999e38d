// The float64 oracle: a scalar, readable implementation of docs/attention.md, reading the
// same paged cache view the backends read. Used by tests and `pagedattn check` only.
#pragma once

#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"

namespace pagedattn::reference {

struct ReferenceInputs {
  TensorView query;            // [T, Hq, D] host, f32/f16/bf16
  TensorView kv_cache;         // [num_blocks, 2, block_size, Hkv, D] host, logical view, any layout
  TensorView block_table;      // [B, max_blocks] int32 host
  TensorView seq_lens;         // [B] int32 host
  TensorView query_start_loc;  // [B + 1] int32 host
  KVScales scales;             // host, FP8 caches only
  bool causal = true;          // the step's; the layer's attn_type may override it (causal_in_step)
};

struct ReferenceOutputs {
  std::vector<double> out;  // [T, Hq, D]
  std::vector<double> lse;  // [Hq, T], -inf for rows with nothing visible
};

StatusOr<ReferenceOutputs> reference_attention(const ReferenceInputs& inputs,
                                               const AttentionImplParams& params);

}  // namespace pagedattn::reference
