// The decode kernel: a fixed grid of CTAs, each running the work units the plan gave it, then
// units of the plan's shared pool, as one stream of KV tiles through a kStages-deep pipeline; and
// the host-side launch of one instantiation. The grid is the plan's num_ctas whatever the batch, so
// a captured CUDA graph replays any plan made for it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode/mainloop.cuh"
#include "runtime/current_device.h"

namespace pagedattn::kernels::decode {

// The kernel's body: the CTA's units of the plan, then pool units, as one tile stream.
template <typename Cfg, typename T>
__device__ __forceinline__ void run_decode_kernel(const DecodeArgs& a) {
  extern __shared__ __align__(128) char smem_base[];
  char* smem = smem_base;
  if constexpr (Cfg::kTma) {  // swizzled panels: 1024-byte aligned (kAlignSlack)
    smem =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_base) + 1023) & ~uintptr_t{1023});
    init_slice_barriers<Cfg>(smem);
  }
  char* plan = static_cast<char*>(const_cast<void*>(a.p.plan));  // the pool counters change
  const auto* header = reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* cta_begin = reinterpret_cast<const int32_t*>(plan + kDecodePlanCtaBeginOffset);
  const auto* units = reinterpret_cast<const DecodeWorkUnit*>(plan + header->units_offset);
  auto* counters =
      reinterpret_cast<DecodePoolCounters*>(plan + decode_pool_counters_offset(*header));
  const int pool_tiles = max(1, (counters->min_keys + Cfg::kBlockN - 1) / Cfg::kBlockN);
  UnitPublisher<Cfg> q{units,
                       cta_begin[blockIdx.x],
                       cta_begin[blockIdx.x + 1],
                       cta_begin[gridDim.x],
                       header->num_units,
                       &counters->next,
                       pool_tiles};
  run_stream<Cfg, T>(a, units, q, smem);
  leave_pool(counters);
}

// TMA, mbarrier waits and async-proxy fences are sm_90 instructions: below it the TMA
// configurations compile to a trap (the launcher picks them only on compute capability 9).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
inline constexpr bool kArchHasTma = false;
#else
inline constexpr bool kArchHasTma = true;
#endif

template <typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    decode_kernel(const __grid_constant__ DecodeArgs a) {
  if constexpr (Cfg::kTma && !kArchHasTma) {
    __trap();
  } else {
    run_decode_kernel<Cfg, T>(a);
  }
}

template <typename Cfg, typename T>
cudaError_t prepare_decode_kernel() {
  return cudaFuncSetAttribute(decode_kernel<Cfg, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Cfg::kSmemBytes);
}

// TMA configurations: cudaErrorNotSupported when the cache has no tensor map (alignment,
// strides), before anything is launched.
template <typename Cfg, typename T>
cudaError_t launch_decode_config(const DecodeArgs& a, cudaStream_t stream) {
  cudaError_t err = prepare_decode_kernel<Cfg, T>();
  if (err != cudaSuccess) return err;
  if constexpr (Cfg::kTma) {
    DecodeArgs with_map = a;
    if (encode_decode_kv_maps<Cfg>(with_map) != CUDA_SUCCESS) return cudaErrorNotSupported;
    decode_kernel<Cfg, T><<<a.p.num_ctas, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(with_map);
  } else {
    decode_kernel<Cfg, T><<<a.p.num_ctas, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a);
  }
  return cudaGetLastError();
}

template <typename Cfg, typename T>
int decode_config_ctas_per_sm() {
  if (prepare_decode_kernel<Cfg, T>() != cudaSuccess) return 0;
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, decode_kernel<Cfg, T>, Cfg::kThreads,
                                                    Cfg::kSmemBytes) != cudaSuccess) {
    return 0;
  }
  return blocks;
}

// Whether the current device runs the TMA tiles: compute capability 9 and a build with sm_90a
// code (PAGEDATTN_KERNEL_SM90_BUILT, the library's own definition).
inline bool device_runs_decode_tma() {
#if PAGEDATTN_KERNEL_SM90_BUILT
  const StatusOr<const CudaDeviceInfo*> device = runtime::current_cuda_device();
  return device.ok() && (*device)->capability.major == 9;
#else
  return false;
#endif
}

// Defined in the decode_hd<N>_*.cu instantiation files: TMA tiles where they serve, cp.async
// tiles otherwise (the same CTAs per SM, so the plan's grid fits either).
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_decode_instance(const DecodeArgs& a, cudaStream_t stream) {
  if constexpr (kDecodeTmaServes<kHeadDim, kCache>) {
    if (device_runs_decode_tma()) {
      const cudaError_t err = launch_decode_config<DecodeTmaConfig<kHeadDim, kCache>, T>(a, stream);
      if (err != cudaErrorNotSupported) return err;
    }
  }
  return launch_decode_config<DecodeCopyConfig<kHeadDim, kCache>, T>(a, stream);
}

template <int kHeadDim, typename T, CacheKind kCache>
int decode_instance_ctas_per_sm() {
  if constexpr (kDecodeTmaServes<kHeadDim, kCache>) {
    static_assert(DecodeTmaConfig<kHeadDim, kCache>::kMinCtasPerSm ==
                      DecodeCopyConfig<kHeadDim, kCache>::kMinCtasPerSm,
                  "both tile kinds must fit the plan's grid");
    if (device_runs_decode_tma()) {
      return decode_config_ctas_per_sm<DecodeTmaConfig<kHeadDim, kCache>, T>();
    }
  }
  return decode_config_ctas_per_sm<DecodeCopyConfig<kHeadDim, kCache>, T>();
}

}  // namespace pagedattn::kernels::decode
