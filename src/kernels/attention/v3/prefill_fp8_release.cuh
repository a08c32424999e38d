// How the v3 FP8 prefill kernel's roles arrive on the barriers that hand shared memory to the other
// role: every thread, or (kFp8TuneWarpArrivals) lane 0 of each warp once the warp's lanes are done
// (their writes fenced for the async proxy before, as they are; the barriers then count warps).
#pragma once

#include <cstdint>

#include "device/mbarrier.cuh"

namespace pagedattn::kernels::attention::v3 {

template <bool kPerWarp>
__device__ __forceinline__ void release_to_other_role(uint64_t* bar) {
  if constexpr (kPerWarp) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) device::mbarrier_arrive(bar);
  } else {
    device::mbarrier_arrive(bar);
  }
}

}  // namespace pagedattn::kernels::attention::v3
