// The body of launch_prefill_fp8_kernel<kD> (prefill_fp8_instance.h), included by the per-size
// files.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "kernels/attention/v3/prefill_fp8_instance.h"
#include "kernels/attention/v3/prefill_fp8_kernel.cuh"
#include "kernels/attention/v3/prefill_instance.h"
#include "runtime/check.h"

namespace pagedattn::kernels::attention::v3 {

template <int kD, int kTuning>
Status launch_prefill_fp8_variant(const CUtensorMap& q_map, const CUtensorMap& kv_map,
                                  const PrefillFp8Args& args, int grid, cudaStream_t stream) {
  const auto kernel = paged_prefill_v3_fp8_kernel<kD, kTuning>;
  constexpr int kSmem =
      static_cast<int>(prefill_fp8_smem_bytes<kD, fp8_kv_tile_keys(kD, kTuning)>());
  static_assert(kSmem <= 227 * 1024, "an sm_90 CTA has at most 227 KB of shared memory");
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
      "v3 FP8 shared memory limit");
  kernel<<<grid, PrefillFp8Shape<kD>::kThreads, kSmem, stream>>>(q_map, kv_map, args);
  return runtime::check_launch("paged_prefill_v3_fp8_kernel");
}

// The kernel of args.tuning among kFp8BuiltTunings.
template <int kD, size_t... kI>
Status launch_built_fp8_variant(const CUtensorMap& q_map, const CUtensorMap& kv_map,
                                const PrefillFp8Args& args, int grid, cudaStream_t stream,
                                std::index_sequence<kI...>) {
  using Launch =
      Status (*)(const CUtensorMap&, const CUtensorMap&, const PrefillFp8Args&, int, cudaStream_t);
  constexpr Launch kLaunches[] = {&launch_prefill_fp8_variant<kD, kFp8BuiltTunings[kI]>...};
  for (size_t i = 0; i < sizeof...(kI); ++i) {
    if (kFp8BuiltTunings[i] == args.tuning) return kLaunches[i](q_map, kv_map, args, grid, stream);
  }
  return invalid_argument("paged attention v3 FP8: tuning " + std::to_string(args.tuning) +
                          " is not a built variant (kFp8BuiltTunings)");
}

template <int kD>
Status launch_prefill_fp8_kernel(const CUtensorMap& q_map, const CUtensorMap& kv_map,
                                 const PrefillFp8Args& args, int grid, cudaStream_t stream) {
  if constexpr (!prefill_head_size_built(kD)) {
    return unimplemented("paged attention v3 FP8: head size " + std::to_string(kD) +
                         " is not built");
  } else {
    return launch_built_fp8_variant<kD>(
        q_map, kv_map, args, grid, stream,
        std::make_index_sequence<sizeof(kFp8BuiltTunings) / sizeof(kFp8BuiltTunings[0])>());
  }
}

}  // namespace pagedattn::kernels::attention::v3
