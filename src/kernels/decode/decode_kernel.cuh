// The decode kernel: a fixed grid of CTAs, each running the work units the plan gave it, with a
// kStages-deep cp.async pipeline over the unit's KV tiles; and the host-side launch of one
// instantiation. The grid is the plan's num_ctas whatever the batch, so a captured CUDA graph
// replays any plan made for it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode/decode_epilogue.cuh"

namespace pagedattn::kernels::decode {

template <typename Cfg, typename T>
__device__ __forceinline__ void run_unit(const DecodeArgs& a, const UnitWork& w, char* smem) {
  const DecodeAttentionParams& p = a.p;
  const int warp = threadIdx.x / 32;
  char* stages = smem;
  auto* ring = reinterpret_cast<int32_t*>(smem + Cfg::kStages * Cfg::kStageBytes);
  const int t_begin = w.kv_begin / Cfg::kBlockN;
  const int t_end = (w.kv_end + Cfg::kBlockN - 1) / Cfg::kBlockN;

  // Block ids run kStages - 1 tiles ahead of the K/V copies: the prologue fetches those of the
  // first 2 (kStages - 1) tiles; the query loads overlap their latency.
  for (int x = t_begin; x < min(t_end, t_begin + Cfg::kRingTiles); ++x) {
    fetch_block_ids<Cfg>(a, w, x, true, ring);
  }
  device::cp_async_commit();
  uint32_t qa[Cfg::kKSteps][4];
  load_q_fragments<Cfg, T>(a, w, qa);
  const int scale_idx = p.per_head_scales ? w.kv_head : 0;
  ScoreParams sp;
  sp.qk_scale = Cfg::kFp8 ? p.k_scale[scale_idx] : p.scale;  // FP8: Q carries the scale
  sp.softcap = attention::soft_cap_applies(p.softcap);
  if (sp.softcap) sp.cap = attention::make_soft_cap(sp.qk_scale, p.softcap, kLog2e);
  sp.alibi = p.alibi_slopes != nullptr;
  sp.exp_scale = (sp.softcap || sp.alibi) ? 1.0f : sp.qk_scale * kLog2e;
  const float v_scale = Cfg::kFp8 ? p.v_scale[scale_idx] : 1.0f;
  WarpState<Cfg> st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.m[h] = -INFINITY;
    st.l[h] = 0.0f;
  }
#pragma unroll
  for (int dt = 0; dt < 2 * Cfg::kKSteps; ++dt)
#pragma unroll
    for (int i = 0; i < 4; ++i) st.o[dt][i] = 0.0f;
  // Keys every row of the tile sees: tiles inside need no mask.
  const int pos_first = w.kv_len - w.q_len + w.row0 / a.group;
  const int pos_last = w.kv_len - w.q_len + (w.row0 + w.rows - 1) / a.group;
  const int open_lo = unit_visible_keys(a, w, pos_last).lo;
  const int open_hi = unit_visible_keys(a, w, pos_first).hi;

  device::cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (t_begin + s < t_end) {
      load_kv_tile<Cfg>(a, w, t_begin + s, true, ring, stages + s * Cfg::kStageBytes);
    }
    device::cp_async_commit();
  }
  const int warp_key0 = warp * Cfg::kWarpKeys;
  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    device::cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    const int t_next = t + Cfg::kStages - 1;
    load_kv_tile<Cfg>(a, w, t_next, t_next < t_end, ring,
                      stages + ((it + Cfg::kStages - 1) % Cfg::kStages) * Cfg::kStageBytes);
    fetch_block_ids<Cfg>(a, w, t_next + Cfg::kStages - 1, t_next + Cfg::kStages - 1 < t_end,
                         ring);
    device::cp_async_commit();
    const char* tile = stages + (it % Cfg::kStages) * Cfg::kStageBytes;
    const int key0 = t * Cfg::kBlockN;
    const bool need_mask = key0 < open_lo || key0 + Cfg::kBlockN - 1 > open_hi;
    float s[Cfg::kWarpKeys / 8][4];
    compute_scores<Cfg, T>(s, qa, device::smem_addr(tile), warp_key0);
    transform_scores<Cfg::kWarpKeys / 8>(s, sp, need_mask, a, w, key0 + warp_key0);
    online_softmax<Cfg>(s, st, sp.exp_scale);
    accumulate_pv<Cfg, T>(s, st, device::smem_addr(tile + Cfg::kTileBytes), warp_key0);
  }
  device::cp_async_wait<0>();
  __syncthreads();
  store_unit<Cfg, T>(a, w, st, v_scale, smem);
}

template <typename Cfg, typename T>
__global__ void __launch_bounds__(128) decode_kernel(const __grid_constant__ DecodeArgs a) {
  extern __shared__ __align__(128) char smem[];
  const char* plan = static_cast<const char*>(a.p.plan);
  const auto* header = reinterpret_cast<const DecodePlanHeader*>(plan);
  const auto* cta_begin = reinterpret_cast<const int32_t*>(plan + kDecodePlanCtaBeginOffset);
  const auto* units = reinterpret_cast<const DecodeWorkUnit*>(plan + header->units_offset);
  const int end = cta_begin[blockIdx.x + 1];
  for (int u = cta_begin[blockIdx.x]; u < end; ++u) {
    run_unit<Cfg, T>(a, load_unit(units, u, a.group), smem);
  }
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
