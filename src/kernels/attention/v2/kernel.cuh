// The v2 paged varlen attention kernel (mma.sync, sm_80+): one CTA runs the cp.async pipeline over
// its split's K/V tiles (mainloop_load, fp8_convert, mainloop) and writes its rows (epilogue); the
// tile scheduler says which work that is. Also the host-side launch of one instantiation.
//
// Requests whose packed rows fit the decode-shaped tile (decode, short spec-verify with small GQA
// groups) run in the decode-shaped kernel, the others in the prefill-shaped one: two kernels
// rather than one with both paths, because a kernel holding both is sized (registers, shared
// memory) for the larger and spills.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/attention/v2/epilogue.cuh"
#include "kernels/attention/v2/fp8_convert.cuh"
#include "kernels/attention/v2/kv_source.cuh"
#include "kernels/attention/v2/mainloop.cuh"
#include "kernels/attention/v2/mainloop_load.cuh"
#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

template <typename Cfg, typename T, CacheKind kCache, typename Kv>
__device__ __forceinline__ void run_cta(const KernelArgs& a, const CtaWork& w, int num_splits,
                                        char* smem) {
  constexpr bool kFp8 = is_fp8(kCache);
  const PagedAttentionParams& p = a.p;

  const SplitTiles tiles = split_tiles<Cfg>(a, w, num_splits);
  const int t_begin = tiles.begin, t_end = tiles.end;

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
    fetch_tile_blocks<Cfg, Kv>(a, w, x, true, table_ring);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (t_begin + s < t_end) {
      load_kv_tile<Cfg, T, kCache, Kv>(a, w, t_begin + s, true, table_ring,
                                       stages + s * kStageStride);
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
    load_kv_tile<Cfg, T, kCache, Kv>(a, w, t_next, t_next < t_end, table_ring, stage);
    fetch_tile_blocks<Cfg, Kv>(a, w, t_next + Cfg::kStages - 1, t_next + Cfg::kStages - 1 < t_end,
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
    // A tile inside [all_lo, all_hi] is visible to every row of the CTA: no mask needed.
    const bool need_mask = key0 + Cfg::kBlockN - 1 > tiles.all_hi || key0 < tiles.all_lo;
    float s[Cfg::kMT][Cfg::kWarpKeys / 8][4];
    compute_scores<Cfg, T>(s, device::smem_addr(q_tile), device::smem_addr(tile), key0, need_mask,
                           sp, a, w);
    softmax_and_pv<Cfg, T>(s, acc, device::smem_addr(tile + Cfg::kKTileBytes), sp.softmax_scale);
  }
  device::cp_async_wait<0>();
  __syncthreads();
  store_output<Cfg, T>(a, w, acc, v_scale, smem);
}

template <int kHeadDim, typename T, CacheKind kCache, bool kLarge, typename Kv>
__global__ void __launch_bounds__(128)
    paged_attention_kernel(const __grid_constant__ KernelArgs a) {
  extern __shared__ __align__(128) char smem[];
  using Small = typename SmallTile<kHeadDim, is_fp8(kCache)>::Type;
  using Large = typename LargeTile<kHeadDim>::Type;
  CtaWork w;
  int num_splits;
  if (!schedule_cta<Small, Large, kLarge>(a, w, num_splits)) return;
  if constexpr (!is_fp8(kCache)) {
    if (reads_new_tokens(a, w) == Kv::kPaged) return;  // the other source's kernel serves it
  }
  if constexpr (kLarge) {
    run_cta<Large, T, kCache, Kv>(a, w, num_splits, smem);
  } else {
    run_cta<Small, T, kCache, Kv>(a, w, num_splits, smem);
  }
}

template <typename Cfg, bool kLarge, int kHeadDim, typename T, CacheKind kCache, typename Kv>
cudaError_t launch_tile_kernel(const KernelArgs& a, unsigned row_tiles, cudaStream_t stream) {
  constexpr int kSmem = Cfg::smem_bytes(is_fp8(kCache));
  auto kernel = paged_attention_kernel<kHeadDim, T, kCache, kLarge, Kv>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  kernel<<<grid_shape(a, row_tiles), Cfg::kThreads, kSmem, stream>>>(a);
  return cudaGetLastError();
}

// The kernels of one tile shape: the paged source's where there is a cache, the ragged source's
// where the caller gave the new tokens (16-bit caches only); each returns at once for the other's
// requests.
template <typename Cfg, bool kLarge, int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_tile_kernels(const KernelArgs& a, unsigned row_tiles, cudaStream_t stream) {
  if (a.p.k_cache != nullptr) {
    const cudaError_t err =
        launch_tile_kernel<Cfg, kLarge, kHeadDim, T, kCache, PagedKv>(a, row_tiles, stream);
    if (err != cudaSuccess) return err;
  }
  if constexpr (!is_fp8(kCache)) {
    if (a.p.k_new != nullptr) {
      return launch_tile_kernel<Cfg, kLarge, kHeadDim, T, kCache, RaggedKv>(a, row_tiles, stream);
    }
  }
  return cudaSuccess;
}

// Launches one instantiation (defined in the generated instantiations/ files): the
// prefill-shaped kernels when some request may have more than the decode-shaped tile's rows, then
// the decode-shaped ones (their CTAs for larger requests return at once).
template <int kHeadDim, typename T, CacheKind kCache>
cudaError_t launch_paged_attention_instance(const KernelArgs& a, cudaStream_t stream) {
  static_assert(is_fp8(kCache) || (kCache == CacheKind::kBF16) == std::is_same_v<T, __nv_bfloat16>,
                "a 16-bit cache has the query's dtype");
  using Small = typename SmallTile<kHeadDim, is_fp8(kCache)>::Type;
  using Large = typename LargeTile<kHeadDim>::Type;
  if (const unsigned row_tiles = prefill_row_tiles<Small, Large>(a); row_tiles > 0) {
    cudaError_t err = launch_tile_kernels<Large, true, kHeadDim, T, kCache>(a, row_tiles, stream);
    if (err != cudaSuccess) return err;
  }
  return launch_tile_kernels<Small, false, kHeadDim, T, kCache>(a, 1u, stream);
}

}  // namespace pagedattn::kernels::attention::v2
