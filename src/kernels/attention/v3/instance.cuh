// The body of launch_prefill_kernel<kD> (v3/instance.h), included by the per-size files.
#pragma once

#include <string>

#include "kernels/attention/v3/instance.h"
#include "kernels/attention/v3/kernel.cuh"
#include "runtime/check.h"

namespace pagedattn::kernels::attention::v3 {

template <int kD>
Status launch_prefill_kernel(const CUtensorMap& q_map, const KvMaps& kv_maps,
                             const PrefillArgs& args, int grid, cudaStream_t stream) {
  if constexpr (!prefill_head_size_built(kD)) {
    return unimplemented("paged attention v3: head size " + std::to_string(kD) + " is not built");
  } else {
    // GQA packing serves no score transforms (launch_sm90.cu refuses them).
    const auto kernel = args.packed_positions > 0 ? paged_prefill_v3_kernel<kD, false, true>
                        : args.score.transform    ? paged_prefill_v3_kernel<kD, true>
                                                  : paged_prefill_v3_kernel<kD, false>;
    constexpr int kSmem = static_cast<int>(prefill_smem_bytes<kD>());
    // D 128 with two Q buffers and staged O takes 225 KB of the 227 an sm_90 block may have.
    static_assert(kSmem <= 227 * 1024, "v3 prefill shared memory over the sm_90 limit");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
        "v3 shared memory limit");
    kernel<<<grid, PrefillTraits<kD>::kThreads, kSmem, stream>>>(q_map, kv_maps, args);
    return runtime::check_launch("paged_prefill_v3_kernel");
  }
}

}  // namespace pagedattn::kernels::attention::v3
