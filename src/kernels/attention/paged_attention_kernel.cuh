// The paged varlen attention kernel ("v2": mma.sync, sm_80+): tile scheduling, the cp.async
// pipeline over K/V tiles, and the host-side launch of one instantiation.
//
// Grid: x = (request * max_num_splits + split) * (KV heads * output-column chunks) + KV head
// chunk, y = row tile of the request's packed rows (128 rows for prefill-shaped tiles). Every
// bound comes from upper bounds (max_query_len, max_num_splits, num_reqs), so the launch is
// CUDA-graph safe; CTAs past a request's real work return at once. Requests whose packed rows fit
// 16 (decode, short spec-verify with small GQA groups) run in the decode-shaped kernel, the others
// in the prefill-shaped one: two kernels rather than one with both paths, because a kernel holding
// both is sized (registers, shared memory) for the larger and spills.
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
  // This split's share of the tiles the rows can see (their union is [lo_first, hi_last]):
  // splitting the visible range, not the whole sequence, keeps every split of a windowed request
  // busy.
  const int n_tiles = (w.kv_len + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int vis_begin = lo_first / Cfg::kBlockN;
  const int vis_end = hi_last < lo_first ? vis_begin : min(n_tiles, hi_last / Cfg::kBlockN + 1);
  const int per_split = (vis_end - vis_begin + num_splits - 1) / num_splits;
  const int t_begin = min(vis_end, vis_begin + w.split * per_split);
  const int t_end = min(vis_end, t_begin + per_split);

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
  auto* table_ring = reinterpret_cast<int32_t*>(stages + Cfg::stage_bytes(kFp8));

  load_q_tile<Cfg, T>(a, w, q_tile);
  // Block ids run kStages - 1 tiles ahead of the K/V copies: the prologue fetches those of the
  // first 2 * (kStages - 1) tiles and waits for them (the copies of the first kStages - 1 need
  // them now).
  for (int x = t_begin; x < min(t_end, t_begin + 2 * Cfg::kStages - 2); ++x) {
    fetch_tile_blocks<Cfg>(a, w, x, true, table_ring);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (t_begin + s < t_end) {
      load_kv_tile<Cfg, T, kCache>(a, w, t_begin + s, true, table_ring, stages + s * kStageStride);
    }
    device::cp_async_commit();
  }

  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    device::cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    // No branch around the copies (past t_end they are zero-size): they share a basic block with
    // the MMAs below, so ptxas interleaves their address arithmetic with the tensor-core issue.
    const int t_next = t + Cfg::kStages - 1;
    char* stage = stages + ((it + Cfg::kStages - 1) % Cfg::kStages) * kStageStride;
    load_kv_tile<Cfg, T, kCache>(a, w, t_next, t_next < t_end, table_ring, stage);
    fetch_tile_blocks<Cfg>(a, w, t_next + Cfg::kStages - 1, t_next + Cfg::kStages - 1 < t_end,
                           table_ring);
    device::cp_async_commit();
    char* tile = stages + (it % Cfg::kStages) * kStageStride;
    if constexpr (kFp8) {
      if constexpr (Cfg::kWarpsN > 1) {
        // Each warp reads only its own kWarpKeys keys: it converts them itself, no CTA barrier.
        const int warp = threadIdx.x / 32;
        convert_fp8_rows<Cfg, T, kCache, Cfg::kWarpKeys>(
            tile, fp8_tile, (warp % Cfg::kWarpsN) * Cfg::kWarpKeys, threadIdx.x % 32, 32);
        __syncwarp();
      } else {
        convert_fp8_rows<Cfg, T, kCache, Cfg::kBlockN>(tile, fp8_tile, 0, threadIdx.x,
                                                       Cfg::kThreads);
        __syncthreads();
      }
      tile = fp8_tile;
    }
    const int key0 = t * Cfg::kBlockN;
    // A tile inside [lo_last, hi_first] is visible to every row of the CTA: no mask needed.
    const bool need_mask = key0 + Cfg::kBlockN - 1 > hi_first || key0 < lo_last;
    float s[Cfg::kMT][Cfg::kWarpKeys / 8][4];
    compute_scores<Cfg, T>(s, device::smem_addr(q_tile), device::smem_addr(tile), key0, need_mask,
                           sp, a, w);
    softmax_and_pv<Cfg, T>(s, acc, device::smem_addr(tile + Cfg::kKTileBytes), sp.softmax_scale);
  }
  device::cp_async_wait<0>();
  __syncthreads();
  store_output<Cfg, T>(a, w, acc, v_scale, smem);
}

template <int kHeadDim, typename T, CacheKind kCache, bool kLarge>
__global__ void __launch_bounds__(128)
    paged_attention_kernel(const __grid_constant__ KernelArgs a) {
  extern __shared__ __align__(128) char smem[];
  using Small = typename SmallTile<kHeadDim, kCache != CacheKind::kSame>::Type;
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
  if (w.q_len <= 0 || (w.rows > Small::kBlockM) != kLarge) return;
  if constexpr (kLarge) {
    w.row0 = (gridDim.y - 1 - blockIdx.y) * Large::kBlockM;
    if (w.row0 >= w.rows) return;
    run_cta<Large, T, kCache>(a, w, num_splits, smem);
  } else {
    w.row0 = 0;
    run_cta<Small, T, kCache>(a, w, num_splits, smem);
  }
}

template <typename Cfg, bool kLarge, int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_tile_kernel(const KernelArgs& a, unsigned row_tiles, cudaStream_t stream) {
  constexpr int kSmem = Cfg::smem_bytes(kCache != CacheKind::kSame);
  auto kernel = paged_attention_kernel<kHeadDim, T, kCache, kLarge>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  const PagedAttentionParams& p = a.p;
  const dim3 grid(static_cast<unsigned>(p.num_reqs * p.max_num_splits * p.num_kv_heads * a.dchunks),
                  row_tiles);
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(a);
  return cudaGetLastError();
}

// Launches one instantiation (defined in the generated paged_attention_hd<N>_*.cu files): the
// prefill-shaped kernel when some request may have more than 16 packed rows, then the
// decode-shaped one (its CTAs for larger requests return at once).
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_paged_attention_instance(const KernelArgs& a, cudaStream_t stream) {
  using Small = typename SmallTile<kHeadDim, kCache != CacheKind::kSame>::Type;
  using Large = typename LargeTile<kHeadDim>::Type;
  const int64_t max_rows = static_cast<int64_t>(a.p.max_query_len) * a.group;
  if (max_rows > Small::kBlockM) {
    const auto row_tiles = static_cast<unsigned>((max_rows + Large::kBlockM - 1) / Large::kBlockM);
    cudaError_t err = launch_tile_kernel<Large, true, kHeadDim, T, kCache>(a, row_tiles, stream);
    if (err != cudaSuccess) return err;
  }
  return launch_tile_kernel<Small, false, kHeadDim, T, kCache>(a, 1u, stream);
}

}  // namespace pagedattn::kernels::attention
