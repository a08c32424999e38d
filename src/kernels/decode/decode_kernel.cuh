// The decode kernel: a fixed grid of CTAs, each running the work units the plan gave it, with a
// kStages-deep cp.async pipeline over their KV tiles (one stream across the units, or one
// pipeline per unit); and the host-side launch of one instantiation. The grid is the plan's
// num_ctas whatever the batch, so a captured CUDA graph replays any plan made for it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode/decode_stream.cuh"

namespace pagedattn::kernels::decode {

// One unit with its own pipeline: filled at its start, drained before its epilogue.
template <typename Cfg, typename T>
__device__ __forceinline__ void run_unit(const DecodeArgs& a, const UnitWork& w, char* smem) {
  char* stages = smem;
  auto* ring = reinterpret_cast<int32_t*>(smem + Cfg::kStages * Cfg::kStageBytes);
  const int t_begin = first_tile(w, Cfg::kBlockN);
  const int t_end = end_tile(w, Cfg::kBlockN);

  // Block ids run kStages - 1 tiles ahead of the K/V copies: the prologue fetches those of the
  // first 2 (kStages - 1) tiles; the query loads overlap their latency.
  for (int x = t_begin; x < min(t_end, t_begin + Cfg::kRingTiles); ++x) {
    fetch_block_ids<Cfg>(a, w, x, true, ring, x % Cfg::kRingTiles);
  }
  device::cp_async_commit();
  UnitContext<Cfg> c;
  WarpState<Cfg> st;
  begin_unit<Cfg, T>(a, w, c, st);

  device::cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (t_begin + s < t_end) {
      load_kv_tile<Cfg>(a, w, t_begin + s, true, ring, (t_begin + s) % Cfg::kRingTiles,
                        stages + s * Cfg::kStageBytes);
    }
    device::cp_async_commit();
  }
  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    device::cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    const int t_next = t + Cfg::kStages - 1;
    load_kv_tile<Cfg>(a, w, t_next, t_next < t_end, ring, t_next % Cfg::kRingTiles,
                      stages + ((it + Cfg::kStages - 1) % Cfg::kStages) * Cfg::kStageBytes);
    const int t_ids = t_next + Cfg::kStages - 1;
    fetch_block_ids<Cfg>(a, w, t_ids, t_ids < t_end, ring, t_ids % Cfg::kRingTiles);
    device::cp_async_commit();
    compute_tile<Cfg, T>(a, w, c, st, t, stages + (it % Cfg::kStages) * Cfg::kStageBytes);
  }
  device::cp_async_wait<0>();
  __syncthreads();
  store_unit<Cfg, T>(a, w, st, c.v_scale, smem);
}

__device__ __forceinline__ unsigned long long global_timer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(ns));
  return ns;
}

template <typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    decode_kernel(const __grid_constant__ DecodeArgs a) {
  extern __shared__ __align__(128) char smem[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A combine launched with overlap_launch may start its CTAs now: it waits for this whole grid.
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  const char* plan = static_cast<const char*>(a.p.plan);
  const auto* header = reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* cta_begin = reinterpret_cast<const int32_t*>(plan + kDecodePlanCtaBeginOffset);
  const auto* units = reinterpret_cast<const DecodeWorkUnit*>(plan + header->units_offset);
  const int begin = cta_begin[blockIdx.x], end = cta_begin[blockIdx.x + 1];
  if (a.cta_clock != nullptr && threadIdx.x == 0) a.cta_clock[2 * blockIdx.x] = global_timer();
  if constexpr (Cfg::kStream) {
    run_stream<Cfg, T>(a, units, begin, end, smem);
  } else {
    for (int u = begin; u < end; ++u) run_unit<Cfg, T>(a, load_unit(units, u, a.group), smem);
  }
  if (a.cta_clock != nullptr && threadIdx.x == 0) a.cta_clock[2 * blockIdx.x + 1] = global_timer();
}

template <typename Cfg, typename T>
cudaError_t prepare_decode_kernel() {
  return cudaFuncSetAttribute(decode_kernel<Cfg, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Cfg::kSmemBytes);
}

template <typename Cfg, typename T>
cudaError_t launch_decode_config(const DecodeArgs& a, cudaStream_t stream) {
  cudaError_t err = prepare_decode_kernel<Cfg, T>();
  if (err != cudaSuccess) return err;
  decode_kernel<Cfg, T><<<a.p.num_ctas, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a);
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

// Defined in the decode_hd<N>_*.cu instantiation files.
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_decode_instance(const DecodeArgs& a, cudaStream_t stream) {
  return launch_decode_config<DefaultDecodeConfig<kHeadDim, kCache>, T>(a, stream);
}

template <int kHeadDim, typename T, CacheKind kCache>
int decode_instance_ctas_per_sm() {
  return decode_config_ctas_per_sm<DefaultDecodeConfig<kHeadDim, kCache>, T>();
}

}  // namespace pagedattn::kernels::decode
