// The paged varlen attention kernel ("v2": mma.sync, sm_80+): tile scheduling, the cp.async
// pipeline over K/V tiles, and the host-side launch of one instantiation.
//
// Grid: x = (request * max_num_splits + split) * (KV heads * output-column chunks) + KV head
// chunk, y = row tile of the request's packed rows (128 rows for prefill-shaped tiles). Every
// bound comes from upper bounds (max_query_len, max_num_splits, num_reqs), so the launch is
// CUDA-graph safe; CTAs past a request's real work return at once. A request whose packed rows
// fit 16 (decode, short spec-verify with small GQA groups) uses the decode-shaped tile in the same
// launch as prefill-shaped ones.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/paged_attention_epilogue.cuh"

namespace pagedattn::kernels::attention {

template <typename Cfg, typename T, CacheKind kCache>
__device__ __forceinline__ void run_cta(const KernelArgs& a, CtaWork& w, int num_splits,
                                        char* smem) {
  constexpr bool kFp8 = kCache != CacheKind::kSame;
  const PagedAttentionParams& p = a.p;

  // Rows of this CTA and the keys any of them can see.
  const int last_row = min(w.rows, w.row0 + Cfg::kBlockM) - 1;
  int lo_first, hi_first, lo_last, hi_last;
  visible_keys(p, w.kv_len, w.ctx + w.row0 / a.group, lo_first, hi_first);
  visible_keys(p, w.kv_len, w.ctx + last_row / a.group, lo_last, hi_last);
  // This split's tiles, clipped to the visible range.
  const int n_tiles = (w.kv_len + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int per_split = (n_tiles + num_splits - 1) / num_splits;
  const int t_begin = max(w.split * per_split, lo_first / Cfg::kBlockN);
  const int t_end = hi_last < lo_first
                        ? t_begin
                        : min(min(n_tiles, (w.split + 1) * per_split), hi_last / Cfg::kBlockN + 1);

  const int scale_idx = p.per_head_scales ? w.kv_head : 0;
  ScoreParams sp;
  sp.qk_scale = p.scale * (kFp8 ? p.k_scale[scale_idx] : 1.0f);
  sp.softcap = p.softcap;
  sp.alibi = p.alibi_slopes != nullptr;
  sp.softmax_scale = (sp.softcap > 0.0f || sp.alibi) ? 1.0f : sp.qk_scale * kLog2e;
  const float v_scale = kFp8 ? p.v_scale[scale_idx] : 1.0f;

  WarpAccum<Cfg> acc;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      acc.m2[mt][h] = -INFINITY;
      acc.l[mt][h] = 0.0f;
    }
#pragma unroll
    for (int dt = 0; dt < Cfg::kDV / 8; ++dt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc.o[mt][dt][i] = 0.0f;
  }

  char* q_tile = smem;
  char* stages = smem + Cfg::kQBytes;
  constexpr int kStageStride = kFp8 ? Cfg::kRawStageBytes : Cfg::kStageBytes;
  char* fp8_tile = stages + Cfg::kStages * Cfg::kRawStageBytes;  // FP8 only: converted tile

  load_q_tile<Cfg, T>(a, w, q_tile);
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (t_begin + s < t_end) {
      load_kv_tile<Cfg, T, kCache>(a, w, (t_begin + s) * Cfg::kBlockN, stages + s * kStageStride);
    }
    device::cp_async_commit();
  }

  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    device::cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    const int t_next = t + Cfg::kStages - 1;
    if (t_next < t_end) {
      char* stage = stages + ((it + Cfg::kStages - 1) % Cfg::kStages) * kStageStride;
      load_kv_tile<Cfg, T, kCache>(a, w, t_next * Cfg::kBlockN, stage);
    }
    device::cp_async_commit();
    char* tile = stages + (it % Cfg::kStages) * kStageStride;
    if constexpr (kFp8) {
      convert_fp8_tile<Cfg, T, kCache>(tile, fp8_tile);
      __syncthreads();
      tile = fp8_tile;
    }
    const int key0 = t * Cfg::kBlockN;
    // A tile inside [lo_last, hi_first] is visible to every row of the CTA: no mask needed.
    const bool need_mask = key0 + Cfg::kBlockN - 1 > hi_first || key0 < lo_last;
    float s[Cfg::kMT][Cfg::kWarpKeys / 8][4];
    compute_scores<Cfg, T>(s, device::smem_addr(q_tile), device::smem_addr(tile), key0,
                           need_mask, sp, a, w);
    softmax_and_pv<Cfg, T>(s, acc, device::smem_addr(tile + Cfg::kKTileBytes), sp.softmax_scale);
  }
  device::cp_async_wait<0>();
  __syncthreads();
  store_output<Cfg, T>(a, w, acc, v_scale, smem);
}

template <int kHeadDim, typename T, CacheKind kCache, bool kMixed>
__global__ void __launch_bounds__(128)
    paged_attention_kernel(const __grid_constant__ KernelArgs a) {
  extern __shared__ __align__(128) char smem[];
  using Small = typename SmallTile<kHeadDim>::Type;
  using Large = typename LargeTile<kHeadDim>::Type;
  const PagedAttentionParams& p = a.p;
  // KV heads vary fastest so that CTAs running together read neighbouring bytes of the same
  // cache blocks; the heaviest (last) row tiles start first.
  const int heads = p.num_kv_heads * a.dchunks;
  const int head_idx = blockIdx.x % heads;
  const int work = blockIdx.x / heads;
  CtaWork w;
  w.req = work / p.max_num_splits;
  w.split = work % p.max_num_splits;
  const int num_splits = p.num_splits_per_req != nullptr
                             ? min(max(p.num_splits_per_req[w.req], 1), p.max_num_splits)
                             : p.max_num_splits;
  if (w.split >= num_splits) return;
  w.kv_head = head_idx / a.dchunks;
  w.dchunk = head_idx % a.dchunks;
  w.q_start = p.cu_seqlens_q[w.req];
  w.q_len = p.cu_seqlens_q[w.req + 1] - w.q_start;
  w.kv_len = p.seqused_k[w.req];
  w.rows = w.q_len * a.group;
  w.ctx = w.kv_len - w.q_len;
  if (w.q_len <= 0) return;
  if (!kMixed || w.rows <= Small::kBlockM) {
    if (blockIdx.y != 0) return;
    w.row0 = 0;
    run_cta<Small, T, kCache>(a, w, num_splits, smem);
  } else {
    w.row0 = (gridDim.y - 1 - blockIdx.y) * Large::kBlockM;
    if (w.row0 >= w.rows) return;
    run_cta<Large, T, kCache>(a, w, num_splits, smem);
  }
}

// Launches one instantiation (defined in the generated paged_attention_hd<N>_*.cu files).
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_paged_attention_instance(const KernelArgs& a, cudaStream_t stream) {
  using Small = typename SmallTile<kHeadDim>::Type;
  using Large = typename LargeTile<kHeadDim>::Type;
  constexpr bool kFp8 = kCache != CacheKind::kSame;
  const PagedAttentionParams& p = a.p;
  const int64_t max_rows = static_cast<int64_t>(p.max_query_len) * a.group;
  const bool mixed = max_rows > Small::kBlockM;
  const int smem = mixed ? max(Small::smem_bytes(kFp8), Large::smem_bytes(kFp8))
                         : Small::smem_bytes(kFp8);
  auto kernel = mixed ? paged_attention_kernel<kHeadDim, T, kCache, true>
                      : paged_attention_kernel<kHeadDim, T, kCache, false>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const unsigned row_tiles =
      mixed ? static_cast<unsigned>((max_rows + Large::kBlockM - 1) / Large::kBlockM) : 1u;
  const dim3 grid(static_cast<unsigned>(p.num_reqs * p.max_num_splits * p.num_kv_heads * a.dchunks),
                  row_tiles);
  kernel<<<grid, 128, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace pagedattn::kernels::attention
