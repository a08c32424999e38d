// The producer of the v3 prefill kernel: for each work tile of the CTA, Q, then K and V of every
// KV tile into their rings, K one tile ahead of V. Q comes by TMA. K/V (pages that hold whole KV
// tiles or divide them): pages smaller than the tile have their block ids read a tile ahead by the
// producer warps' lanes, and elected lanes of up to four warps issue one TMA box per page (per page
// and panel where the group map does not apply; pages holding whole tiles: one box per tile where
// the map allows, tma_kv_tile); warp 0 copies a request's last, partial V tile with cp.async
// instead, so that the rows past its keys are zeros in shared memory (those page slots hold
// whatever was written before, NaN included, and 0 * NaN would reach the output).
// The ring's use count runs on across work tiles, so the next tile's Q and first K/V tiles load
// while the consumers finish the previous one.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/tile_scheduler.cuh"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/kv_maps.cuh"

namespace pagedattn::kernels::attention::v3 {

// Copies V rows [key0, key0 + kBlockN) through the tile's page ids (tile_page_id; row0: the
// tile's first slot in its page, 0 when pages are smaller than the tile); rows at or past k_len
// become zeros.
template <int kD>
__device__ __forceinline__ void copy_partial_v_tile(const PrefillArgs& a, const PrefillTile& w,
                                                    int page_id, int row0, int key0, uint8_t* dst) {
  using S = PrefillTraits<kD>;
  constexpr int kChunksPerRow = kD / 8;  // 16-byte chunks
  const KvTileStrides kv = kv_tile_strides<kD>(a.kv_group_major);
  const uint16_t* head = a.v_cache + w.kv_head * a.cache_head_stride;
  const uint32_t base = device::smem_addr(dst);
  const int lane = threadIdx.x % 32;
#pragma unroll 4
  for (int c = lane; c < S::kBlockN * kChunksPerRow; c += 32) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow, slot = row0 + row;
    const int block = __shfl_sync(0xffffffffu, page_id, slot / a.block_size);
    const uint32_t to = base + (chunk / 8) * kv.panel + (row / 8) * kv.group +
                        device::swizzle128_offset(row % 8, chunk % 8);
    const uint16_t* from = head + block * a.cache_block_stride +
                           (slot % a.block_size) * a.cache_token_stride + chunk * 8;
    device::cp_async_16(to, from, key0 + row < w.k_len ? 16 : 0);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  device::fence_proxy_async_shared();  // the consumers read these rows through wgmma
  __syncwarp();
}

// K or V of one KV tile by TMA through its plane's map: one box of the whole tile where the map has
// the panels as a dimension (a.panel_fold); one box per page of every panel by the group map
// (a.kv_group_major: the tile group-major); else one box of min(block_size, kBlockN) rows per
// page and 64-column panel, landing at the page's row offset in the panel (a multiple of 16 rows,
// so of the swizzle's 8-row period: the boxes' swizzle agrees with the panel's). Block ids come
// from the lanes (tile_page_id). The boxes are dealt to the first a.box_warps producer warps (box
// b to warp b % box_warps; each warp's elected lane issues) because each copy holds its issuing
// thread a few hundred cycles whatever its size; warp 0 expects the tile's bytes (the barrier's
// tx-count may go negative meanwhile: the phase still waits for its one arrival).
template <int kD>
__device__ __forceinline__ void tma_kv_tile(const CUtensorMap* kv_map, const PrefillArgs& a,
                                            const PrefillTile& w, int page_id, int row0, int warp,
                                            bool leader, uint8_t* dst, uint64_t* full) {
  using S = PrefillTraits<kD>;
  if (a.panel_fold != PanelFold::kNone) {  // one box of every panel
    if (warp == 0 && leader) {
      device::mbarrier_arrive_expect_tx(full, S::kKvTileBytes);
      if (a.panel_fold == PanelFold::kPanel) {  // {column, token, head x panels + panel, block}
        const int32_t c[4] = {0, row0, w.kv_head * S::kPanels, page_id};
        device::tma_load<4>(dst, kv_map, c, full);
      } else {  // {column, token, panel, head, block}
        const int32_t c[5] = {0, row0, 0, w.kv_head, page_id};
        device::tma_load<5>(dst, kv_map, c, full);
      }
    }
    return;
  }
  const int rows = min(a.block_size, S::kBlockN);
  if (warp == 0 && leader) device::mbarrier_arrive_expect_tx(full, S::kKvTileBytes);
  if (a.kv_group_major) {  // a page's box: {column, token, panel, head, group}
    for (int page = warp; page < S::kBlockN / rows; page += a.box_warps) {
      const int block = __shfl_sync(0xffffffffu, page_id, page);
      if (!leader) continue;
      const int32_t c[5] = {0, 0, 0, w.kv_head, block * a.kv_groups_per_block};
      device::tma_load<5>(dst + page * rows * S::kPanels * 128, kv_map, c, full);
    }
    return;
  }
  const bool token_first = a.kv_token_coord == 1;
  for (int box = warp; box < (S::kBlockN / rows) * S::kPanels; box += a.box_warps) {
    const int page = box / S::kPanels, panel = box % S::kPanels;
    const int block = __shfl_sync(0xffffffffu, page_id, page);
    if (!leader) continue;
    // Map coordinates: {column, token or head, head or token, block}.
    const int32_t c[4] = {64 * panel, token_first ? row0 : w.kv_head,
                          token_first ? w.kv_head : row0, block};
    device::tma_load<4>(dst + panel * S::kKvPanelBytes + page * rows * 128, kv_map, c, full);
  }
}

// The block ids of a KV tile's pages, read a tile ahead so that no copy waits on a table load:
// lane l holds the id of the tile's page l (at most 8: pages of 16 or more tokens). Lanes past the
// request's pages hold the tile's first page (a valid block; its K rows are masked, its V rows
// zero-filled), so the table is never read past the request's pages, whose entries may be anything.
__device__ __forceinline__ int tile_page_id(const PrefillArgs& a, const PrefillTile& w,
                                            const int32_t* table, int key0) {
  const int page = key0 / a.block_size + static_cast<int>(threadIdx.x % 32);
  const bool in_request = page * a.block_size < w.k_len;  // true in lane 0: key0 < k_len
  const int id = in_request ? table[page] : 0;
  const int first = __shfl_sync(0xffffffffu, id, 0);
  return in_request ? id : first;
}

// Q of one work tile: its panels into buffer tile_count % kQStages, once the consumers are done
// with the tile that used that buffer before. Packed (kPacked): the map's boxes are group heads x
// packed_positions tokens (tile rows in (position, head) order), so the same coordinates load the
// KV head's query heads; the rows past them keep what the buffer held (never stored).
template <int kD, bool kPacked>
__device__ __forceinline__ void load_q(const CUtensorMap* q_map, const PrefillArgs& a,
                                       const PrefillTile& w, PrefillSmem<kD>& s, int tile_count) {
  using S = PrefillTraits<kD>;
  const int slot = tile_count % S::kQStages;
  device::mbarrier_wait(&s.q_empty[slot], ((tile_count / S::kQStages) & 1) ^ 1);
  const int bytes = kPacked ? S::kPanels * a.packed_positions * a.group * 128 : S::kQTileBytes;
  device::mbarrier_arrive_expect_tx(&s.q_full[slot], bytes);
  for (int panel = 0; panel < S::kPanels; ++panel) {
    const int32_t c[3] = {64 * panel, w.head, w.q_start + w.q0};
    device::tma_load<3>(s.q[slot] + panel * S::kQPanelBytes, q_map, c, &s.q_full[slot]);
  }
}

// Run by the first a.box_warps warps of the producer warpgroup.
template <int kD, bool kPacked>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const KvMaps* kv_maps,
                                        const PrefillArgs& a, int total_tiles, PrefillSmem<kD>& s) {
  using S = PrefillTraits<kD>;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const bool leader = device::elect_one();
  TileWalk walk{total_tiles};
  PrefillTile w;
  int use = 0;  // of the ring, across work tiles
  for (int tile_count = 0; walk.find<kD, kPacked>(a, w); walk.advance(), ++tile_count) {
    if (warp == 0 && leader) load_q<kD, kPacked>(q_map, a, w, s, tile_count);
    const int32_t* table = a.block_table + w.req * a.block_table_stride;
    const bool small_pages = a.block_size < S::kBlockN;
    const int first_key = w.kv_tile0 * S::kBlockN;
    int next_page_id = small_pages ? tile_page_id(a, w, table, first_key) : 0;
    // K runs one tile ahead of V: K_i is issued before V_{i-1}, so that waiting for V's slot
    // (freed when both consumers finish P·V two tiles back) never holds back the next K.
    int prev_page_id = 0, prev_row0 = 0, prev_key0 = 0;
    const auto issue_v = [&](int u, int pid, int r0, int k0) {
      const int stage = u % S::kStages;
      device::mbarrier_wait(&s.v_empty[stage], ((u / S::kStages) & 1) ^ 1);
      if (k0 + S::kBlockN <= w.k_len) {
        tma_kv_tile<kD>(&kv_maps->v, a, w, pid, r0, warp, leader, s.v[stage], &s.v_full[stage]);
      } else if (warp == 0) {
        copy_partial_v_tile<kD>(a, w, pid, r0, k0, s.v[stage]);
        if (leader) device::mbarrier_arrive(&s.v_full[stage]);
      }
    };
    for (int i = 0; i < w.num_kv_tiles; ++i, ++use) {
      const int stage = use % S::kStages;
      const uint32_t parity = ((use / S::kStages) & 1) ^ 1;  // a fresh barrier's previous phase
      const int key0 = first_key + i * S::kBlockN;           // is done
      // Pages holding whole tiles: one entry, read by every lane (the same value in each).
      int page_id = small_pages ? next_page_id : table[key0 / a.block_size];
      if (small_pages && i + 1 < w.num_kv_tiles) {
        next_page_id = tile_page_id(a, w, table, key0 + S::kBlockN);
      }
      const int row0 = key0 % a.block_size;  // 0 when pages are smaller than the tile
      device::mbarrier_wait(&s.k_empty[stage], parity);
      tma_kv_tile<kD>(&kv_maps->k, a, w, page_id, row0, warp, leader, s.k[stage], &s.k_full[stage]);
      if (i > 0) issue_v(use - 1, prev_page_id, prev_row0, prev_key0);
      prev_page_id = page_id, prev_row0 = row0, prev_key0 = key0;
    }
    if (w.num_kv_tiles > 0) issue_v(use - 1, prev_page_id, prev_row0, prev_key0);
  }
}

}  // namespace pagedattn::kernels::attention::v3
