// The body of launch_prefill_fp8_kernel<kD> (v3/fp8/instance.h), included by the per-size
// files.
#pragma once

#include <string>

#include "kernels/attention/v3/fp8/instance.h"
#include "kernels/attention/v3/fp8/kernel.cuh"
#include "kernels/attention/v3/instance.h"
#include "runtime/check.h"

namespace pagedattn::kernels::attention::v3 {

template <int kD, Fp8Tiles kTiles>
Status launch_prefill_fp8_config(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                 const PrefillFp8Args& args, int grid, cudaStream_t stream) {
  const auto kernel = args.q_e4m3 ? paged_prefill_v3_fp8_kernel<kD, kTiles, true>
                                  : paged_prefill_v3_fp8_kernel<kD, kTiles, false>;
  constexpr int kSmem =
      static_cast<int>(prefill_fp8_smem_bytes<kD, fp8_kv_tile_keys(kD, kTiles)>());
  static_assert(kSmem <= 227 * 1024, "an sm_90 CTA has at most 227 KB of shared memory");
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
      "v3 FP8 shared memory limit");
  kernel<<<grid, PrefillFp8Traits<kD>::kThreads, kSmem, stream>>>(q_map, k_map, args);
  return runtime::check_launch("paged_prefill_v3_fp8_kernel");
}

template <int kD>
Status launch_prefill_fp8_kernel(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                 const PrefillFp8Args& args, Fp8Tiles tiles, int grid,
                                 cudaStream_t stream) {
  if constexpr (!prefill_head_size_built(kD)) {
    return unimplemented("paged attention v3 FP8: head size " + std::to_string(kD) +
                         " is not built");
  } else {
    if constexpr (kD == 256) {
      if (tiles == Fp8Tiles::kWide) {
        return launch_prefill_fp8_config<kD, Fp8Tiles::kWide>(q_map, k_map, args, grid, stream);
      }
    }
    return launch_prefill_fp8_config<kD, Fp8Tiles::kNarrow>(q_map, k_map, args, grid, stream);
  }
}

}  // namespace pagedattn::kernels::attention::v3
