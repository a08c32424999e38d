// One head size's v3 FP8 prefill launch, instantiated in its own sm_90a file
// (prefill_fp8_d<D>_sm90.cu). Host-only header.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/attention/v3/fp8/traits.cuh"
#include "pagedattn/status.h"

namespace pagedattn::kernels::attention::v3 {

// Launches `grid` CTAs of the kD FP8 kernel with KV tiles `tiles` on `stream`; Unimplemented for a
// size the build does not keep (or narrow tiles at D 128, which no served page size needs).
template <int kD>
Status launch_prefill_fp8_kernel(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                 const PrefillFp8Args& args, Fp8Tiles tiles, int grid,
                                 cudaStream_t stream);

}  // namespace pagedattn::kernels::attention::v3
