// TMA tiles of the decode kernel (TileSync::kWarpTma): a tensor map over each plane of the paged
// cache (K and V may lie anywhere), and
// each warp's keys of a tile copied as boxes of 16 keys (each lies in one page: pages are
// multiples of 16 keys) x 128 bytes of columns, 128-byte swizzled, completing on the warp's
// mbarrier of the stage. A box reads all 16 rows, so V rows outside the unit's keys (NaN in unused
// slots is allowed) are zeroed in shared memory before the P V product; K rows there are masked.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/tma.cuh"
#include "kernels/decode/mainloop_load.cuh"
#include "kernels/paged_kv_map.h"

namespace pagedattn::kernels::decode {

// Each plane (kernels/paged_kv_map.h) in boxes of 128 bytes of columns x 16 tokens of one head,
// 128-byte L2 promotion (docs/performance.md has the 256-byte one).
template <typename Cfg>
CUresult encode_decode_kv_maps(DecodeArgs& a) {
  const DecodeAttentionParams& p = a.p;
  const PagedKvMapShape m = paged_kv_map_shape(p, Cfg::kElemBytes, 128 / Cfg::kElemBytes, 16);
  a.kv_token_coord = m.token_coord;
  // What the driver would refuse (16-byte aligned bases, strides in multiples of 16 bytes) is
  // answered here, without a failing driver call (compute-sanitizer reports those as errors).
  bool describable = reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0;
  for (int i = 0; i + 1 < m.rank; ++i) describable = describable && m.strides_bytes[i] % 16 == 0;
  if (!describable) return CUDA_ERROR_INVALID_VALUE;
  const CUtensorMapDataType type =
      Cfg::kFp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
  const CUresult k =
      device::encode_tensor_map_sw128(&a.k_map, type, p.k_cache, m.rank, m.dims, m.strides_bytes,
                                      m.box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  if (k != CUDA_SUCCESS) return k;
  return device::encode_tensor_map_sw128(&a.v_map, type, p.v_cache, m.rank, m.dims, m.strides_bytes,
                                         m.box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

template <typename Cfg>
__device__ __forceinline__ uint64_t* slice_barrier(char* smem, int stage) {
  return reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset) + stage * Cfg::kWarps +
         threadIdx.x / 32;
}

// One thread: every barrier expects one arrival (the issuing lane's) per phase.
template <typename Cfg>
__device__ __forceinline__ void init_slice_barriers(char* smem) {
  if (threadIdx.x == 0) {
    auto* bars = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
    for (int i = 0; i < Cfg::kStages * Cfg::kWarps; ++i) device::mbarrier_init(bars + i, 1);
    device::mbarrier_init_fence();
  }
  __syncthreads();
}

// The warp's first key of tile `tile`.
template <typename Cfg>
__device__ __forceinline__ int slice_key0(int tile) {
  return tile * Cfg::kBlockN + (threadIdx.x / 32) * Cfg::kWarpKeys;
}

// Whether the box of the 16 keys from key0 has a key in the unit.
__device__ __forceinline__ bool box_live(const UnitWork& w, int key0) {
  return key0 < w.kv_end && key0 + 16 > w.kv_begin;
}

// Lane 0 copies the warp's live K and V boxes of tile `tile` (block ids from ring slot `slot`)
// into `stage` and arrives on `bar` expecting their bytes (none live: a plain arrival).
template <typename Cfg>
__device__ __forceinline__ void issue_kv_slice_tma(const DecodeArgs& a, const UnitWork& w, int tile,
                                                   bool live, const int32_t* ring, int slot,
                                                   char* stage, uint64_t* bar) {
  if (threadIdx.x % 32 != 0) return;
  constexpr int kBoxes = Cfg::kWarpKeys / 16;
  const int key0 = slice_key0<Cfg>(tile);
  int boxes = 0;
#pragma unroll
  for (int b = 0; b < kBoxes; ++b) boxes += live && box_live(w, key0 + 16 * b) ? 1 : 0;
  if (boxes == 0) {
    device::mbarrier_arrive(bar);
    return;
  }
  device::mbarrier_arrive_expect_tx(bar, 2 * boxes * Cfg::kBoxBytes);
  char* k_dst = stage + (threadIdx.x / 32) * Cfg::kSliceBytes;
#pragma unroll
  for (int b = 0; b < kBoxes; ++b) {
    const int box_key = key0 + 16 * b;
    if (!box_live(w, box_key)) continue;
    // Rows before kv_begin have no block id in the ring; every row of the box shares the page.
    const int first = max(box_key, w.kv_begin);
    const int block = ring[slot * Cfg::kBlockN + first - tile * Cfg::kBlockN];
    const int token = key_slot(a, box_key);
    int32_t c[4] = {0, a.kv_token_coord == 1 ? token : w.kv_head,
                    a.kv_token_coord == 1 ? w.kv_head : token, block};
#pragma unroll
    for (int plane = 0; plane < 2; ++plane) {
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel) {
        c[0] = panel * 128 / Cfg::kElemBytes;
        device::tma_load<4>(
            k_dst + plane * Cfg::kTileBytes + b * Cfg::kBoxBytes + panel * Cfg::kPanelBytes,
            plane == 0 ? &a.k_map : &a.v_map, c, bar);
      }
    }
  }
}

// After the warp's boxes landed: zeroes its V rows outside the unit's keys (then orders those
// writes before the next TMA into the stage and the warp's reads).
template <typename Cfg>
__device__ __forceinline__ void zero_foreign_v_rows(const UnitWork& w, int tile, char* stage) {
  const int key0 = slice_key0<Cfg>(tile);
  if (key0 >= w.kv_begin && key0 + Cfg::kWarpKeys <= w.kv_end) return;
  char* v = stage + Cfg::kTileBytes + (threadIdx.x / 32) * Cfg::kSliceBytes;
  for (int idx = threadIdx.x % 32; idx < Cfg::kWarpKeys * Cfg::kChunks; idx += 32) {
    const int row = idx / Cfg::kChunks, chunk = idx % Cfg::kChunks;
    const int key = key0 + row;
    if (key < w.kv_begin || key >= w.kv_end) {
      *reinterpret_cast<uint4*>(v + tile_chunk_offset<Cfg>(row, chunk)) = make_uint4(0, 0, 0, 0);
    }
  }
  device::fence_proxy_async_shared();
  __syncwarp();
}

}  // namespace pagedattn::kernels::decode
