// One head size's v3 prefill launch, instantiated in its own sm_90a file
// (v3/instantiations/prefill_v3_hd<D>_sm90.cu)
// so the sizes compile in parallel. Host-only header.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/attention/head_sizes.h"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/kv_maps.cuh"
#include "pagedattn/status.h"

namespace pagedattn::kernels::attention::v3 {

// The head sizes v3 has a shape for (PrefillTraits).
inline constexpr int kPrefillHeadSizes[] = {64, 96, 128, 192, 256};

// True when the build keeps head size d (PAGEDATTN_HEAD_SIZES) and v3 has a shape for it.
constexpr bool prefill_head_size_built(int d) {
  bool shaped = false, built = false;
  for (int n : kPrefillHeadSizes) shaped = shaped || n == d;
  for (int n : BuiltHeadSizes::kValues) built = built || n == d;
  return shaped && built;
}

// Launches `grid` CTAs of the kD kernel on `stream`. Defined in prefill_v3_hd<kD>_sm90.cu, which
// the build compiles only for the head sizes it keeps: call it for prefill_head_size_built sizes.
template <int kD>
Status launch_prefill_kernel(const CUtensorMap& q_map, const KvMaps& kv_maps,
                             const PrefillArgs& args, int grid, cudaStream_t stream);

}  // namespace pagedattn::kernels::attention::v3
