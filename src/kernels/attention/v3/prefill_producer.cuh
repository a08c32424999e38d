// The producer warp of the v3 prefill kernel: Q once, then K and V of every KV tile into the ring.
// One elected lane issues the TMA copies; the whole warp copies a request's last, partial V tile
// with cp.async instead, so that the rows past its keys are zeros in shared memory (those page
// slots hold whatever was written before, NaN included, and 0 * NaN would reach the output).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_shape.cuh"

namespace pagedattn::kernels::attention::v3 {

// The CTA's work: one request, one query head, 128 query rows.
struct PrefillTile {
  int req;
  int head;
  int kv_head;
  int q_start;  // the request's first token in the packed batch
  int q_len;
  int k_len;
  int q0;            // first query row of the CTA, within the request
  int num_kv_tiles;  // KV tiles any of its rows can see
};

// Copies V rows [key0, key0 + 128) of one page slot range; rows at or past k_len become zeros.
__device__ __forceinline__ void copy_partial_v_tile(const PrefillArgs& a, const PrefillTile& w,
                                                    int block, int row0, int key0, uint8_t* dst) {
  using S = PrefillShape;
  const uint16_t* page = a.kv_cache + block * a.cache_block_stride + a.cache_kv_stride +
                         w.kv_head * a.cache_head_stride;
  const uint32_t base = device::smem_addr(dst);
  const int lane = threadIdx.x % 32;
#pragma unroll 4
  for (int c = lane; c < S::kBlockN * 16; c += 32) {  // 16 chunks of 8 columns per row
    const int row = c / 16, chunk = c % 16;
    const uint32_t to =
        base + (chunk / 8) * S::kPanelBytes + device::swizzle128_offset(row, chunk % 8);
    const uint16_t* from = page + (row0 + row) * a.cache_token_stride + chunk * 8;
    device::cp_async_16(to, from, key0 + row < w.k_len ? 16 : 0);
  }
  device::cp_async_commit();
  device::cp_async_wait<0>();
  device::fence_proxy_async_shared();  // the consumers read these rows through wgmma
  __syncwarp();
}

// Run by warp 0 of the producer warpgroup.
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                        const PrefillArgs& a, const PrefillTile& w,
                                        PrefillSmem& s) {
  using S = PrefillShape;
  const bool leader = device::elect_one();
  if (leader) {
    device::mbarrier_arrive_expect_tx(&s.q_full, S::kTileBytes);
    for (int panel = 0; panel < 2; ++panel) {
      const int32_t c[3] = {64 * panel, w.head, w.q_start + w.q0};
      device::tma_load<3>(s.q + panel * S::kPanelBytes, q_map, c, &s.q_full);
    }
  }
  const int32_t* table = a.block_table + w.req * a.block_table_stride;
  for (int i = 0; i < w.num_kv_tiles; ++i) {
    const int stage = i % S::kStages;
    const uint32_t parity = ((i / S::kStages) & 1) ^ 1;  // a fresh barrier's previous phase is done
    const int key0 = i * S::kBlockN;
    const int block = table[key0 / a.block_size];
    const int row0 = key0 % a.block_size;
    // Map coordinates: {column, token or head, head or token, plane, block}.
    const bool token_first = a.kv_token_coord == 1;
    int32_t c[5] = {0, token_first ? row0 : w.kv_head, token_first ? w.kv_head : row0, 0, block};

    device::mbarrier_wait(&s.k_empty[stage], parity);
    if (leader) {
      device::mbarrier_arrive_expect_tx(&s.k_full[stage], S::kTileBytes);
      for (int panel = 0; panel < 2; ++panel) {
        c[0] = 64 * panel;
        device::tma_load<5>(s.k[stage] + panel * S::kPanelBytes, kv_map, c, &s.k_full[stage]);
      }
    }
    device::mbarrier_wait(&s.v_empty[stage], parity);
    if (key0 + S::kBlockN <= w.k_len) {
      if (leader) {
        device::mbarrier_arrive_expect_tx(&s.v_full[stage], S::kTileBytes);
        c[3] = 1;
        for (int panel = 0; panel < 2; ++panel) {
          c[0] = 64 * panel;
          device::tma_load<5>(s.v[stage] + panel * S::kPanelBytes, kv_map, c, &s.v_full[stage]);
        }
      }
    } else {
      copy_partial_v_tile(a, w, block, row0, key0, s.v[stage]);
      if (leader) device::mbarrier_arrive(&s.v_full[stage]);
    }
  }
}

}  // namespace pagedattn::kernels::attention::v3
