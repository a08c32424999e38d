// Host side of the v3 FP8 prefill kernel, called from launch_sm90.cu's checks and dispatch.
// Host-only header.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/v3/fp8/traits.cuh"
#include "pagedattn/status.h"

namespace pagedattn::kernels::attention::v3 {

// What the FP8 kernel serves beyond the bf16 kernel's checks: bf16 queries with an e4m3 cache
// (e5m2 stays on v2: no e5m2 products here), head sizes 128 and 256, pages of whole KV tiles,
// scales given, scale > 0, cache strides of 16 bytes. OK or Unimplemented naming the parameter.
Status check_fp8_served(const PagedAttentionParams& p);

// Launches the FP8 kernel for p (checked), with the bf16 kernel's Q map (bf16 boxes of 64 columns x
// a query tile), filled arguments `base` (tiles, mask, output) and grid.
Status launch_prefill_fp8(const PagedAttentionParams& p, const CUtensorMap& q_map,
                          const PrefillArgs& base, int grid, cudaStream_t stream);

}  // namespace pagedattn::kernels::attention::v3
