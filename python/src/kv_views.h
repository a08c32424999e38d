// Views that vLLM's call shapes need: a paged cache given as its K and V halves, and FP8 scales
// given as scalars or broadcast [num_reqs, Hkv] descale tensors.
#pragma once

#include "pagedattn/tensor.h"

namespace pagedattn::python {

// key_cache and value_cache [num_blocks, block_size, Hkv, D] (one dtype, device and stride set)
// as the library's [num_blocks, 2, block_size, Hkv, D] view: the K/V plane stride is the distance
// between the two halves, wherever they live. The whole offset range both planes reach must fit 64
// bits; on CUDA the distance must be in [0, 2^31) elements (the GPU kernels' plane stride), else a
// ValueError naming it (the CPU backend takes any distance).
TensorView paged_kv_view(const TensorView& key_cache, const TensorView& value_cache);

// A scale as the library takes it ([1] per tensor or [Hkv] per head): a 0-d scalar becomes [1], a
// [num_reqs, Hkv] tensor broadcast over requests (stride 0, as vLLM's expand() makes) becomes its
// first row. Undefined stays undefined.
TensorView scale_view(const TensorView& scale, const char* name);

}  // namespace pagedattn::python
