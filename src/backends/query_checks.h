// The query every backend's forward takes (AttentionImpl::forward): the layer's dtype, or
// fp8_e4m3 with its scale (KVScales::q_scale, vLLM's q_descale) over a layer of another dtype.
#pragma once

#include "pagedattn/backend.h"

namespace pagedattn::backends {

// The dtype the query must have: e4m3 where it is (and the layer's dtype is not), else the
// layer's; check_rows-style checks then name the query's rows.
DType forward_query_dtype(const AttentionImplParams& layer, const TensorView& query);

// q_scale: undefined, or float32 [1] or [num_reqs, num_kv_heads] on the layer's device, and only
// beside an e4m3 query.
Status check_query_scale(const AttentionImplParams& layer, const TensorView& query,
                         const TensorView& q_scale, int num_reqs);

}  // namespace pagedattn::backends
