// The producer warpgroup of the v3 FP8 prefill kernel. Warp 0 issues every copy, in the order the
// consumers use them, waiting only for free ring slots; warps 1-3 convert Q. For each work tile of
// the CTA:
// - Q: the tile comes by TMA into a staging buffer a work tile ahead. A bf16 query row r is
//   converted to e4m3 with its own power-of-two scale 2^e, the largest with amax(row) * 2^e <= 448:
//   the scaling is exact, e4m3's rounding the only error, and the row's 2^-e goes to the consumers
//   (q_descale), which fold it into the row's score scale. A per-row scale follows each row's
//   range, with no pre-pass over Q and no global buffer. An e4m3 query (vLLM's FA3 FP8 path) is
//   staged in s.q's own layout and copied as it is, its given descale for every row.
// - K by TMA (one elected lane; boxes inside one page, whole tiles even at a request's end), and
//   the tile's Vᵀ by one bulk copy of the pre-pass's image (v3/fp8/v_transpose.h), which the launch
//   wrote before the kernel: FP8 wgmma reads both operands K-major, and a transpose here cost every
//   CTA that read a tile the same work again.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/fp8_wgmma_operands.cuh"
#include "device/mbarrier.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/fp8/traits.cuh"
#include "kernels/attention/v3/fp8/v_transpose.h"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) {
  return __uint_as_float(bits << 16);
}

// The Q of work tile w into s.q_stage (the leader; rows past the tokens read as zeros): panels of
// 64 bf16 or (kE4m3) 128 e4m3 columns.
template <int kD, bool kE4m3, int kN>
__device__ __forceinline__ void load_q_stage(const CUtensorMap* q_map, const PrefillTile& w,
                                             PrefillFp8Smem<kD, kN>& s) {
  using S = PrefillFp8Traits<kD, kN>;
  constexpr int kColumns = kE4m3 ? 128 : 64;
  device::mbarrier_arrive_expect_tx(&s.q_stage_full, kD / kColumns * S::kQStagePanelBytes);
  for (int panel = 0; panel < kD / kColumns; ++panel) {
    const int32_t c[3] = {kColumns * panel, w.head, w.q_start + w.q0};
    device::tma_load<3>(s.q_stage + panel * S::kQStagePanelBytes, q_map, c, &s.q_stage_full);
  }
}

// 16-byte chunk c (8 bf16 columns) of query row `row` in the staged Q.
template <int kD, int kN>
__device__ __forceinline__ uint4 staged_q_chunk(const PrefillFp8Smem<kD, kN>& s, int row, int c) {
  return *reinterpret_cast<const uint4*>(s.q_stage +
                                         (c / 8) * PrefillFp8Traits<kD, kN>::kQStagePanelBytes +
                                         device::swizzle128_offset(row, c % 8));
}

// Query row tid of the staged Q into s.q as e4m3, and its descale. Rows past the request hold
// other tokens or zeros: converted alike, never stored.
template <int kD, int kN>
__device__ __forceinline__ void convert_q_row(PrefillFp8Smem<kD, kN>& s, int tid) {
  using S = PrefillFp8Traits<kD, kN>;
  float amax = 0.0f;
#pragma unroll 4
  for (int c = 0; c < kD / 8; ++c) {
    const uint4 x = staged_q_chunk(s, tid, c);
    const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (uint32_t word : words) {
      amax = fmaxf(amax, fmaxf(fabsf(bf16_bits_to_float(word & 0xFFFFu)),
                               fabsf(bf16_bits_to_float(word >> 16))));
    }
  }
  // 2^e with amax * 2^e <= 448 (e capped so that 2^e stays finite for tiny rows).
  const float exponent = amax > 0.0f ? fminf(floorf(log2f(448.0f / amax)), 126.0f) : 0.0f;
  const float q_scale = exp2f(exponent);
  s.q_descale[tid] = exp2f(-exponent);
#pragma unroll 2
  for (int c = 0; c < kD / 16; ++c) {  // 16 columns: one 16-byte chunk of e4m3
    const uint4 x0 = staged_q_chunk(s, tid, 2 * c), x1 = staged_q_chunk(s, tid, 2 * c + 1);
    const uint32_t words[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    uint32_t packed[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      packed[i] = device::pack_e4m3x4(bf16_bits_to_float(words[2 * i] & 0xFFFFu) * q_scale,
                                      bf16_bits_to_float(words[2 * i] >> 16) * q_scale,
                                      bf16_bits_to_float(words[2 * i + 1] & 0xFFFFu) * q_scale,
                                      bf16_bits_to_float(words[2 * i + 1] >> 16) * q_scale);
    }
    *reinterpret_cast<uint4*>(s.q + (c / 8) * S::kQPanelBytes +
                              device::swizzle128_offset(tid, c % 8)) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Work tile w's staged e4m3 Q into s.q (the same swizzled layout: a plain copy), and w's descale
// (request, KV head) for each row: by threads tid, tid + kThreads, ...
template <int kD, int kThreads, int kN>
__device__ __forceinline__ void copy_staged_q(const PrefillFp8Args& a, const PrefillTile& w,
                                              PrefillFp8Smem<kD, kN>& s, int tid) {
  using S = PrefillFp8Traits<kD, kN>;
  const uint4* staged = reinterpret_cast<const uint4*>(s.q_stage);
  uint4* q = reinterpret_cast<uint4*>(s.q);
  for (int i = tid; i < S::kQTileBytes / 16; i += kThreads) q[i] = staged[i];
  const float descale =
      a.q_descale == nullptr
          ? 1.0f
          : a.q_descale[w.req * a.q_descale_req_stride + w.kv_head * a.q_descale_head_stride];
  for (int row = tid; row < S::kBlockM; row += kThreads) s.q_descale[row] = descale;
}

// The pre-pass's Vᵀ image holding KV tile i of w (v3/fp8/v_transpose.h; clamped to the workspace).
template <int kD, int kN>
__device__ __forceinline__ const uint8_t* vt_image(const PrefillFp8Args& a, const PrefillTile& w,
                                                   int i) {
  const int64_t image =
      min(static_cast<int64_t>(i * kN / fp8_vt_image_keys(kN)), a.vt_images_per_req - 1);
  return a.vt_images + ((w.req * a.vt_images_per_req + image) * a.base.num_kv_heads + w.kv_head) *
                           fp8_vt_image_bytes(kN, kD);
}

// Issues the copies of KV tile `i` of w into ring stage `stage` (warp 0 of the producer): K by
// TMA, one box per panel (a tile lies inside one page; a tile past the request's last page reads
// that page again: its keys are masked), and its Vᵀ image by one bulk copy.
template <int kD, int kN>
__device__ __forceinline__ void load_kv_tile(const CUtensorMap* k_map, const PrefillFp8Args& a,
                                             const PrefillTile& w, int i, int stage,
                                             uint32_t parity, bool leader,
                                             PrefillFp8Smem<kD, kN>& s) {
  using S = PrefillFp8Traits<kD, kN>;
  device::mbarrier_wait(&s.k_empty[stage], parity);
  if (leader) {
    const bool token_first = a.base.kv_token_coord == 1;
    const int last_page = (w.k_len - 1) / a.base.block_size;
    device::mbarrier_arrive_expect_tx(&s.k_full[stage], S::kKvTileBytes);
    const int key = i * S::kBlockN;
    const int page = min(key / a.base.block_size, last_page);
    const int block = a.base.block_table[w.req * a.base.block_table_stride + page];
    const int row0 = key % a.base.block_size;
    // K map coordinates: {column byte, token or head, head or token, block}.
    int32_t c[4] = {0, token_first ? row0 : w.kv_head, token_first ? w.kv_head : row0, block};
    for (int panel = 0; panel < S::kPanels; ++panel) {
      c[0] = 128 * panel;
      device::tma_load<4>(s.k[stage] + panel * S::kKvPanelBytes, k_map, c, &s.k_full[stage]);
    }
  }
  device::mbarrier_wait(&s.vt_empty[stage], parity);
  if (leader) {
    device::mbarrier_arrive_expect_tx(&s.vt_full[stage], S::kVtTileBytes);
    device::bulk_load(s.vt[stage], vt_image<kD, kN>(a, w, i), S::kVtTileBytes, &s.vt_full[stage]);
  }
}

// Work tile w's Q (staged; the CTA's tile_count-th) into s.q, once the consumers are done with the
// previous tile's: query rows tid, tid + kThreads, ... (kThreads: the converting threads).
template <int kD, int kThreads, bool kE4m3, int kN>
__device__ __forceinline__ void convert_staged_q(const PrefillFp8Args& a, const PrefillTile& w,
                                                 int tile_count, PrefillFp8Smem<kD, kN>& s,
                                                 int tid) {
  const uint32_t parity = tile_count & 1;
  device::mbarrier_wait(&s.q_stage_full, parity);
  device::mbarrier_wait(&s.q_empty, parity ^ 1);
  if constexpr (kE4m3) {
    copy_staged_q<kD, kThreads>(a, w, s, tid);
  } else if constexpr (kThreads == PrefillFp8Traits<kD, kN>::kBlockM) {
    convert_q_row<kD>(s, tid);
  } else {
    for (int row = tid; row < PrefillFp8Traits<kD, kN>::kBlockM; row += kThreads) {
      convert_q_row<kD>(s, row);
    }
  }
  device::fence_proxy_async_shared();  // wgmma reads s.q; TMA rewrites s.q_stage
  device::mbarrier_arrive(&s.q_full);
  device::mbarrier_arrive(&s.q_stage_empty);
}

// Run by the producer warpgroup over the CTA's work tiles: warp 0 issues work tile t's Q stage,
// then its K/V tiles, and t + 1's Q stage once t's Q is converted; warps 1-3 convert each work
// tile's Q (kE4m3: copy it) once the consumers have done every S of the previous one.
template <int kD, bool kE4m3, int kN>
__device__ __forceinline__ void produce_fp8(const CUtensorMap* q_map, const CUtensorMap* k_map,
                                            const PrefillFp8Args& a, int total_tiles,
                                            PrefillFp8Smem<kD, kN>& s) {
  using S = PrefillFp8Traits<kD, kN>;
  const int tid = threadIdx.x % 128;
  TileWalk walk{total_tiles};
  PrefillTile w;
  if (!walk.find_keys<kD, kN>(a.base, w)) return;
  if (tid < 32) {
    const bool leader = device::elect_one();
    if (leader) load_q_stage<kD, kE4m3>(q_map, w, s);
    for (int tile_count = 0, use = 0;; ++tile_count) {
      for (int i = 0; i < w.num_kv_tiles; ++i, ++use) {
        load_kv_tile<kD>(k_map, a, w, i, use % S::kStages, ((use / S::kStages) & 1) ^ 1, leader, s);
      }
      walk.advance();
      if (!walk.find_keys<kD, kN>(a.base, w)) return;
      device::mbarrier_wait(&s.q_stage_empty, tile_count & 1);  // tile_count's Q converted
      if (leader) load_q_stage<kD, kE4m3>(q_map, w, s);
    }
  }
  for (int tile_count = 0;; ++tile_count) {
    convert_staged_q<kD, 96, kE4m3>(a, w, tile_count, s, tid - 32);
    walk.advance();
    if (!walk.find_keys<kD, kN>(a.base, w)) return;
  }
}

}  // namespace pagedattn::kernels::attention::v3
