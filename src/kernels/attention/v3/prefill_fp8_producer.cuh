// The producer warpgroup of the v3 FP8 prefill kernel. For each work tile of the CTA:
// - Q: thread r converts query row r (bf16, read from global memory) to e4m3 with its own power-
//   of-two scale 2^e, the largest with amax(row) * 2^e <= 448: the scaling is exact, e4m3's
//   rounding is the only error, and the row's 2^-e goes to the consumers (q_descale), which fold it
//   into the row's score scale. A per-row scale follows each row's range, with no pre-pass over Q
//   and no extra buffer; the conversion is once per work tile, against num_kv_tiles products.
// - K and V by TMA into their rings (warp 0; one elected lane issues), whole tiles even at a
//   request's end (the page holds them: pages are multiples of the KV tile);
// - Vᵀ: all four warps transpose each V tile into the Vᵀ ring (prefill_fp8_operands.cuh), zeroing
//   the keys past the request's, one tile behind the loads so the TMA copies stay ahead.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/fp8_wgmma_operands.cuh"
#include "device/mbarrier.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_fp8_operands.cuh"
#include "kernels/attention/v3/prefill_fp8_shape.cuh"
#include "kernels/attention/v3/prefill_tiles.cuh"

namespace pagedattn::kernels::attention::v3 {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) {
  return __uint_as_float(bits << 16);
}

// Query row tid of the work tile into s.q (zeros past the request) and its descale.
template <int kD>
__device__ __forceinline__ void convert_q_row(const PrefillFp8Args& a, const PrefillTile& w,
                                              PrefillFp8Smem<kD>& s, int tid) {
  using S = PrefillFp8Shape<kD>;
  const bool live = w.q0 + tid < w.q_len;
  const uint4* src = reinterpret_cast<const uint4*>(
      a.q + (live ? (w.q_start + w.q0 + tid) * a.q_token_stride + w.head * a.q_head_stride : 0));
  float amax = 0.0f;
  if (live) {
#pragma unroll 4  // more loads in flight spill the producer's registers
    for (int c = 0; c < kD / 8; ++c) {
      const uint4 x = src[c];
      const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (uint32_t word : words) {
        amax = fmaxf(amax, fmaxf(fabsf(bf16_bits_to_float(word & 0xFFFFu)),
                                 fabsf(bf16_bits_to_float(word >> 16))));
      }
    }
  }
  // 2^e with amax * 2^e <= 448 (e capped so that 2^e stays finite for tiny rows).
  const float exponent = amax > 0.0f ? fminf(floorf(log2f(448.0f / amax)), 126.0f) : 0.0f;
  const float q_scale = exp2f(exponent);
  s.q_descale[tid] = exp2f(-exponent);
  uint8_t* row = s.q;
#pragma unroll 2
  for (int c = 0; c < kD / 16; ++c) {  // 16 columns: one 16-byte chunk of e4m3
    uint32_t packed[4] = {0u, 0u, 0u, 0u};
    if (live) {
      const uint4 x0 = src[2 * c], x1 = src[2 * c + 1];
      const uint32_t words[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        packed[i] = device::pack_e4m3x4(bf16_bits_to_float(words[2 * i] & 0xFFFFu) * q_scale,
                                        bf16_bits_to_float(words[2 * i] >> 16) * q_scale,
                                        bf16_bits_to_float(words[2 * i + 1] & 0xFFFFu) * q_scale,
                                        bf16_bits_to_float(words[2 * i + 1] >> 16) * q_scale);
      }
    }
    *reinterpret_cast<uint4*>(row + (c / 8) * S::kQPanelBytes +
                              device::swizzle128_offset(tid, c % 8)) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Issues the TMA copies of KV tile `i` of w into ring stage `stage` (warp 0 of the producer).
template <int kD>
__device__ __forceinline__ void load_kv_tile(const CUtensorMap* kv_map, const PrefillFp8Args& a,
                                             const PrefillTile& w, int i, int stage,
                                             uint32_t parity, bool leader, PrefillFp8Smem<kD>& s) {
  using S = PrefillFp8Shape<kD>;
  const int key0 = i * S::kBlockN;
  const int block =
      a.base.block_table[w.req * a.base.block_table_stride + key0 / a.base.block_size];
  const int row0 = key0 % a.base.block_size;
  const bool token_first = a.base.kv_token_coord == 1;
  // Map coordinates: {column byte, token or head, head or token, plane, block}.
  int32_t c[5] = {0, token_first ? row0 : w.kv_head, token_first ? w.kv_head : row0, 0, block};
  device::mbarrier_wait(&s.k_empty[stage], parity);
  if (leader) {
    device::mbarrier_arrive_expect_tx(&s.k_full[stage], S::kKvTileBytes);
    for (int panel = 0; panel < S::kPanels; ++panel) {
      c[0] = 128 * panel;
      device::tma_load<5>(s.k[stage] + panel * S::kKvPanelBytes, kv_map, c, &s.k_full[stage]);
    }
  }
  device::mbarrier_wait(&s.v_empty[stage], parity);
  if (leader) {
    device::mbarrier_arrive_expect_tx(&s.v_full[stage], S::kKvTileBytes);
    c[3] = 1;
    for (int panel = 0; panel < S::kPanels; ++panel) {
      c[0] = 128 * panel;
      device::tma_load<5>(s.v[stage] + panel * S::kKvPanelBytes, kv_map, c, &s.v_full[stage]);
    }
  }
}

// Transposes KV tile `i` of w (ring use `use`) once it has landed and its Vᵀ slot is free.
template <int kD>
__device__ __forceinline__ void transpose_kv_tile(const PrefillTile& w, int i, int use,
                                                  PrefillFp8Smem<kD>& s, int tid) {
  using S = PrefillFp8Shape<kD>;
  const int stage = use % S::kStages;
  const uint32_t parity = (use / S::kStages) & 1;
  device::mbarrier_wait(&s.v_full[stage], parity);
  device::mbarrier_wait(&s.vt_empty[stage], parity ^ 1);
  transpose_v_tile<kD>(s.v[stage], s.vt[stage], w.k_len - i * S::kBlockN, tid);
  device::fence_proxy_async_shared();  // the consumers read Vᵀ through wgmma
  device::mbarrier_arrive(&s.v_empty[stage]);
  device::mbarrier_arrive(&s.vt_full[stage]);
}

// Run by the 128 threads of the producer warpgroup.
template <int kD>
__device__ __forceinline__ void produce_fp8(const CUtensorMap* kv_map, const PrefillFp8Args& a,
                                            int total_tiles, PrefillFp8Smem<kD>& s) {
  using S = PrefillFp8Shape<kD>;
  const int tid = threadIdx.x % 128;
  const bool loader = tid / 32 == 0;
  const bool leader = device::elect_one() && loader;
  TileWalk walk{total_tiles};
  PrefillTile w;
  int use = 0;  // of the rings, across work tiles
  for (int tile_count = 0; walk.find<kD>(a.base, w); walk.advance(), ++tile_count) {
    device::mbarrier_wait(&s.q_empty, (tile_count & 1) ^ 1);
    convert_q_row<kD>(a, w, s, tid);
    device::fence_proxy_async_shared();
    device::mbarrier_arrive(&s.q_full);
    for (int i = 0; i < w.num_kv_tiles; ++i) {
      const int u = use + i;
      if (loader) {
        load_kv_tile<kD>(kv_map, a, w, i, u % S::kStages, ((u / S::kStages) & 1) ^ 1, leader, s);
      }
      if (i > 0) transpose_kv_tile<kD>(w, i - 1, u - 1, s, tid);
    }
    use += w.num_kv_tiles;
    transpose_kv_tile<kD>(w, w.num_kv_tiles - 1, use - 1, s, tid);
  }
}

}  // namespace pagedattn::kernels::attention::v3
