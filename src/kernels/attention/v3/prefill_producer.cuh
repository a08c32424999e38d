// The producer of the v3 prefill kernel: for each work tile of the CTA, Q, then K and V of every
// KV tile into the ring. Q always comes by TMA. K/V:
// - pages holding whole KV tiles (TMA mode): producer warp 0 alone; one elected lane issues the TMA
//   copies, and the whole warp copies a request's last, partial V tile with cp.async instead, so
//   that the rows past its keys are zeros in shared memory (those page slots hold whatever was
//   written before, NaN included, and 0 * NaN would reach the output);
// - smaller pages (gather mode, PrefillArgs::gather): the 128 threads of the producer warpgroup
//   copy every row through the block table with cp.async (zeros past the keys), each thread's
//   copies completing on the stage's full barrier (one arrival per thread); the block ids of a
//   tile's pages are read a tile ahead.
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
#include "kernels/attention/v3/prefill_shape.cuh"
#include "kernels/attention/v3/prefill_tiles.cuh"

namespace pagedattn::kernels::attention::v3 {

// Copies V rows [key0, key0 + kBlockN) of one page slot range; rows at or past k_len become zeros.
template <int kD>
__device__ __forceinline__ void copy_partial_v_tile(const PrefillArgs& a, const PrefillTile& w,
                                                    int block, int row0, int key0, uint8_t* dst) {
  using S = PrefillShape<kD>;
  constexpr int kChunksPerRow = kD / 8;  // 16-byte chunks
  const uint16_t* page = a.kv_cache + block * a.cache_block_stride + a.cache_kv_stride +
                         w.kv_head * a.cache_head_stride;
  const uint32_t base = device::smem_addr(dst);
  const int lane = threadIdx.x % 32;
#pragma unroll 4
  for (int c = lane; c < S::kBlockN * kChunksPerRow; c += 32) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const uint32_t to =
        base + (chunk / 8) * S::kKvPanelBytes + device::swizzle128_offset(row, chunk % 8);
    const uint16_t* from = page + (row0 + row) * a.cache_token_stride + chunk * 8;
    device::cp_async_16(to, from, key0 + row < w.k_len ? 16 : 0);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  device::fence_proxy_async_shared();  // the consumers read these rows through wgmma
  __syncwarp();
}

// Gather mode. A KV tile spans at most 9 pages (pages of 16 or more tokens): lane l of every
// producer warp holds the block id of the tile's page l (0 past the request's pages), one
// independent load per lane, read a tile ahead; rows then take theirs by a shuffle, so no copy
// waits on a table load.
__device__ __forceinline__ int tile_page_id(const PrefillArgs& a, const PrefillTile& w,
                                            const int32_t* table, int key0) {
  const int page = key0 / a.block_size + static_cast<int>(threadIdx.x % 32);
  return page * a.block_size < w.k_len ? table[page] : 0;
}

// Copies rows [key0, key0 + kBlockN) of plane 0 (K) or 1 (V); thread t copies 16-byte chunk
// t % (D / 8) of every (128 / (D / 8))-th row; rows past the keys become zeros.
template <int kD>
__device__ __forceinline__ void gather_kv_tile(const PrefillArgs& a, const PrefillTile& w,
                                               int page_id, int key0, int plane, uint8_t* dst) {
  using S = PrefillShape<kD>;
  constexpr int kChunksPerRow = kD / 8;
  constexpr int kRowsPerPass = 128 / kChunksPerRow;
  const int tid = threadIdx.x % 128, chunk = tid % kChunksPerRow;
  const int first_page = key0 / a.block_size;
  const uint32_t base = device::smem_addr(dst) + (chunk / 8) * S::kKvPanelBytes;
  const uint16_t* head =
      a.kv_cache + plane * a.cache_kv_stride + w.kv_head * a.cache_head_stride + chunk * 8;
#pragma unroll 2  // unrolled further, the rows' addresses spill the producer's 56 registers
  for (int pass = 0; pass < S::kBlockN / kRowsPerPass; ++pass) {
    const int row = tid / kChunksPerRow + pass * kRowsPerPass, key = key0 + row;
    const int block = __shfl_sync(0xffffffffu, page_id, key / a.block_size - first_page);
    const bool live = key < w.k_len;
    const uint16_t* from =
        head +
        (live ? block * a.cache_block_stride + (key % a.block_size) * a.cache_token_stride : 0);
    device::cp_async_16(base + device::swizzle128_offset(row, chunk % 8), from, live ? 16 : 0);
  }
}

// Q of one work tile: its panels into buffer tile_count % q_stages, once the consumers are done
// with the tile that used that buffer before.
template <int kD>
__device__ __forceinline__ void load_q(const CUtensorMap* q_map, const PrefillArgs& a,
                                       const PrefillTile& w, PrefillSmem<kD>& s, int tile_count) {
  using S = PrefillShape<kD>;
  const int slot = tile_count % a.q_stages;
  device::mbarrier_wait(&s.q_empty[slot], ((tile_count / a.q_stages) & 1) ^ 1);
  device::mbarrier_arrive_expect_tx(&s.q_full[slot], S::kQTileBytes);
  for (int panel = 0; panel < S::kPanels; ++panel) {
    const int32_t c[3] = {64 * panel, w.head, w.q_start + w.q0};
    device::tma_load<3>(s.q[slot] + panel * S::kQPanelBytes, q_map, c, &s.q_full[slot]);
  }
}

// Run by warp 0 of the producer warpgroup (TMA mode) or by all of it (gather mode).
template <int kD>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                        const PrefillArgs& a, int total_tiles, PrefillSmem<kD>& s) {
  using S = PrefillShape<kD>;
  const bool leader = a.gather ? threadIdx.x == 0 : device::elect_one();
  const bool token_first = a.kv_token_coord == 1;
  TileWalk walk{total_tiles};
  PrefillTile w, next;
  int use = 0;  // of the ring, across work tiles
  // kTuneEarlyFind: the next work tile is described, and its first block id read, at the start of
  // this one, so those loads' latency hides behind this tile's copies. TMA mode reads each KV
  // tile's block id a tile ahead.
  const bool early = (a.tuning & kTuneEarlyFind) != 0;
  auto first_block = [&](const PrefillTile& t) {
    return a.gather ? 0 : a.block_table[t.req * a.block_table_stride];
  };
  bool have = walk.find<kD>(a, w);
  int block_ahead = have ? first_block(w) : 0;
  for (int tile_count = 0; have; ++tile_count) {
    bool have_next = false;
    if (early) {
      walk.advance();
      have_next = walk.find<kD>(a, next);
    }
    if (leader) load_q<kD>(q_map, a, w, s, tile_count);
    const int32_t* table = a.block_table + w.req * a.block_table_stride;
    int next_page_id = a.gather ? tile_page_id(a, w, table, 0) : 0;
    for (int i = 0; i < w.num_kv_tiles; ++i, ++use) {
      const int stage = use % S::kStages;
      const uint32_t parity = ((use / S::kStages) & 1) ^ 1;  // a fresh barrier's previous phase
      const int key0 = i * S::kBlockN;                       // is done
      if (a.gather) {
        const int page_id = next_page_id;
        if (i + 1 < w.num_kv_tiles) next_page_id = tile_page_id(a, w, table, key0 + S::kBlockN);
        device::mbarrier_wait(&s.k_empty[stage], parity);
        gather_kv_tile<kD>(a, w, page_id, key0, 0, s.k[stage]);
        device::mbarrier_arrive_on_cp_async(&s.k_full[stage]);
        device::mbarrier_wait(&s.v_empty[stage], parity);
        gather_kv_tile<kD>(a, w, page_id, key0, 1, s.v[stage]);
        device::mbarrier_arrive_on_cp_async(&s.v_full[stage]);
        continue;
      }
      const int block = block_ahead;
      if (i + 1 < w.num_kv_tiles) {
        block_ahead = table[(key0 + S::kBlockN) / a.block_size];
      } else if (have_next) {
        block_ahead = first_block(next);
      }
      const int row0 = key0 % a.block_size;
      // Map coordinates: {column, token or head, head or token, plane, block}.
      int32_t c[5] = {0, token_first ? row0 : w.kv_head, token_first ? w.kv_head : row0, 0, block};

      device::mbarrier_wait(&s.k_empty[stage], parity);
      if (leader) {
        device::mbarrier_arrive_expect_tx(&s.k_full[stage], S::kKvTileBytes);
        for (int panel = 0; panel < S::kPanels; ++panel) {
          c[0] = 64 * panel;
          device::tma_load<5>(s.k[stage] + panel * S::kKvPanelBytes, kv_map, c, &s.k_full[stage]);
        }
      }
      device::mbarrier_wait(&s.v_empty[stage], parity);
      if (key0 + S::kBlockN <= w.k_len) {
        if (leader) {
          device::mbarrier_arrive_expect_tx(&s.v_full[stage], S::kKvTileBytes);
          c[3] = 1;
          for (int panel = 0; panel < S::kPanels; ++panel) {
            c[0] = 64 * panel;
            device::tma_load<5>(s.v[stage] + panel * S::kKvPanelBytes, kv_map, c, &s.v_full[stage]);
          }
        }
      } else {
        copy_partial_v_tile<kD>(a, w, block, row0, key0, s.v[stage]);
        if (leader) device::mbarrier_arrive(&s.v_full[stage]);
      }
    }
    if (!early) {
      walk.advance();
      have_next = walk.find<kD>(a, next);
      if (have_next) block_ahead = first_block(next);
    }
    w = next;
    have = have_next;
  }
}

}  // namespace pagedattn::kernels::attention::v3
