// Views that vLLM's call shapes need: a paged cache given as its K and V halves, and FP8 scales
// given as scalars or broadcast [num_reqs, Hkv] descale tensors.
#pragma once

#include "pagedattn/kv_cache.h"
#include "pagedattn/tensor.h"

namespace pagedattn::python {

// key_cache and value_cache [num_blocks, block_size, Hkv, D] (one dtype, device and stride set, at
// any two addresses) as the library's two-plane cache; else a ValueError naming them.
KVCacheView paged_kv_view(const TensorView& key_cache, const TensorView& value_cache);

// A scale as the library takes it ([1] per tensor or [Hkv] per head): a 0-d scalar becomes [1], a
// [num_reqs, Hkv] tensor broadcast over requests (stride 0, as vLLM's expand() makes) becomes its
// first row. Undefined stays undefined.
TensorView scale_view(const TensorView& scale, const char* name);

}  // namespace pagedattn::python
