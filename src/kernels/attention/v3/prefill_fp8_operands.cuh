// The second product's operands in the v3 FP8 prefill kernel, and why they need no register
// shuffles.
//
// P·V takes P from registers as the 8-bit A fragment: a thread's register r of k32 step kk holds
// row g (r even) or g + 8 (r odd) at the k positions 4t..4t+3 (r < 2) or 16 + 4t.. (r >= 2). The
// scores arrive in the f32 accumulator layout: the same rows, keys 8j + 2t and 8j + 2t + 1 of each
// n8 block j. So pack_p_fp8 packs, for each 16 keys, the thread's keys 2t, 2t + 1, 8 + 2t, 9 + 2t
// into the register at positions 4t..4t+3: position q of every 16 holds key
// perm(q) = 8 * ((q % 4) / 2) + 2 * (q / 4) + q % 2. Vᵀ is written with the same permutation of its
// keys (transpose_v_tile), so the positions pair up and the product is P·V.
#pragma once

#include <cstdint>

#include "device/fp8_wgmma_operands.cuh"
#include "device/mma.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_fp8_shape.cuh"

namespace pagedattn::kernels::attention::v3 {

// P (kBlockN keys of the thread's two rows, accumulator layout) as e4m3 A fragments.
template <int kSteps>
__device__ __forceinline__ void pack_p_fp8(const float (&s)[16 * kSteps],
                                           uint32_t (&p)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const float* x = s + 16 * kk;  // n8 blocks 4kk .. 4kk + 3
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int h = r % 2, block = 2 * (r / 2);  // row g + 8h; keys 16 * (r / 2) ..
      p[kk][r] = device::pack_e4m3x4(x[4 * block + 2 * h], x[4 * block + 2 * h + 1],
                                     x[4 * (block + 1) + 2 * h], x[4 * (block + 1) + 2 * h + 1]);
    }
  }
}

// Copies the V tile `v` (kBlockN key rows of D bytes, panels of 128 columns, as TMA writes them)
// into `vt` as Vᵀ: row n (head column n) at n * 128, 16-byte chunk c holding keys 16c..16c+15 in
// the order perm (above), 128-byte swizzled. Keys at or past valid_keys become zeros (their page
// slots may hold NaN, and 0 * NaN would reach the output). Run by the 128 threads of a warpgroup
// (tid 0..127); the caller fences for the async proxy.
//
// Unit (group, quad): keys 16 * group .. + 15 of head columns 4 * quad .. + 3, in two halves of 8
// keys (8 bytes of each Vᵀ chunk), so that few registers are live (the producer has 56). A warp's
// lanes take 32 consecutive quads of one group. Stores: the rotation (quad / 2) % 4 of the columns
// gives 8 neighbouring lanes 8 different swizzled chunks, and lanes 8-15 of each 16 do the other
// half first, so a half-warp's 8-byte stores cover 128 bytes. Loads: the lanes' 32-bit reads of a
// key row (or of rows 4 apart, the two halves) hit 32 different banks.
template <int kD>
__device__ __forceinline__ void transpose_v_tile(const uint8_t* v, uint8_t* vt, int valid_keys,
                                                 int tid) {
  using S = PrefillFp8Shape<kD>;  // tiles of one Vᵀ panel (wider ones take the ldmatrix form)
  constexpr int kQuads = kD / 4;
  constexpr int kUnits = S::kBlockN / 16 * kQuads;
  static_assert(kUnits % 128 == 0, "whole passes of the warpgroup");
#pragma unroll 1
  for (int unit = tid; unit < kUnits; unit += 128) {
    const int quad = unit % kQuads, group = unit / kQuads;
    const uint32_t rot = (quad / 2) % 4;
    const device::ByteTransposeSelectors sel = device::byte_transpose_selectors(rot);
    const uint8_t* column = v + (quad / 32) * S::kKvPanelBytes + (quad % 4) * 4;
    const uint32_t chunk = (quad % 32) / 4;
    const int first_half = (quad / 8) & 1;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      const int half = step ^ first_half;
      uint32_t cols[2][4];  // [tt][i]: keys 2t, 2t + 1, 2t + 8, 2t + 9 (t = 2 half + tt) of
                            // head column 4 quad + (i + rot) % 4
#pragma unroll
      for (int tt = 0; tt < 2; ++tt) {
        uint32_t rows[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = 16 * group + 4 * half + 2 * tt + (e % 2) + 8 * (e / 2);
          rows[e] = key < valid_keys ? *reinterpret_cast<const uint32_t*>(
                                           column + device::swizzle128_offset(key, chunk))
                                     : 0u;
        }
        device::transpose_bytes_4x4(rows, sel, cols[tt]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t n = 4 * quad + ((i + rot) & 3);
        *reinterpret_cast<uint2*>(vt + device::swizzle128_offset(n, group) + 8 * half) =
            make_uint2(cols[0][i], cols[1][i]);
      }
    }
  }
}

// transpose_v_tile by ldmatrix.trans: the same Vᵀ, about a third of the instructions. Unit (G, p):
// keys 16G..16G+15 of the 16-byte column chunks 2p and 2p + 1, one ldmatrix.x4.trans per warp;
// lane l addresses key 16G + 8 ((l / 8) % 2) + l % 8 of chunk 2p + l / 16 (matrices 0, 1: chunk 2p,
// keys +0 and +8; 2, 3: chunk 2p + 1) and receives, for t = l % 4, g = l / 4, the bytes (k, c),
// (k, c + 1), (k + 1, c), (k + 1, c + 1) with k = 16G + 2t (+8 in the odd matrices), c = 16 chunk +
// 2g. One byte permute of a matrix pair gives column c's keys 2t, 2t + 1, 8 + 2t, 9 + 2t: word t
// of Vᵀ chunk G in the order perm (above); another gives column c + 1's. The 32-bit stores of a
// warp hit 32 banks when lanes 16-31 store their odd column first. The 8 rows of each matrix are
// 8 swizzled chunks: conflict-free loads. kWhole: every key is the request's (no zeroing).
// kWarps warps take the units in turn (tid 0 .. 32 kWarps - 1). kStsm: one stmatrix.x4 per unit in
// place of the four 32-bit stores: the words are those stores' (matrix 2m + s holds store s of
// chunk 2p + m), lane 8j + r addressing the Vᵀ row that row r of matrix j goes to (the rows of a
// matrix are 8 swizzled chunks: conflict-free). kHoisted (with kStsm): the addresses as a lane
// constant plus a term of the unit's group and one of its pair (a row's swizzle depends on the row
// mod 8 alone, which is the lane's), the unit counter unsigned.
template <int kD, bool kWhole, int kWarps = 4, int kN = PrefillShape<kD>::kBlockN,
          bool kStsm = false, bool kHoisted = false>
__device__ __forceinline__ void transpose_v_tile_ldsm(const uint8_t* v, uint8_t* vt, int valid_keys,
                                                      int tid) {
  using S = PrefillFp8Shape<kD, kN>;
  static_assert(kStsm || !kHoisted, "the hoisted addresses are the stmatrix stores'");
  constexpr uint32_t kGroups = S::kBlockN / 16;
  constexpr uint32_t kUnits = kGroups * (kD / 32);
  const int lane = tid % 32, warp = tid / 32;
  const int t = lane % 4, g = lane / 4;
  // This lane's ldmatrix row: key offset and chunk offset within the unit.
  const uint32_t load_key = 8 * ((lane / 8) % 2) + lane % 8;
  const uint32_t load_chunk = lane / 16;
  // Stores: lanes 16-31 take column c + 1 first.
  const uint32_t odd_first = lane / 16;
  const uint32_t first_sel = odd_first ? 0x7531u : 0x6420u;
  const uint32_t second_sel = odd_first ? 0x6420u : 0x7531u;
  const uint32_t first_col = 2 * g + odd_first, second_col = 2 * g + 1 - odd_first;
  // kStsm: the Vᵀ row (less 32 pair) of row r = lane % 8 of matrix j = lane / 8: that of store
  // j % 2 of chunk 2 pair + j / 2 by the lanes 4r..4r+3 holding it.
  const uint32_t stsm_r = lane % 8, stsm_odd = stsm_r / 4;
  const uint32_t stsm_col =
      16 * (lane / 16) + 2 * stsm_r + ((lane / 8) % 2 == 0 ? stsm_odd : 1 - stsm_odd);
  // kHoisted: the lane's parts of both addresses (key row load_key, Vᵀ row stsm_col).
  const uint32_t v_lane = device::smem_addr(v) + load_key * 128, load_swizzle = lane % 8;
  const uint32_t vt_lane = device::smem_addr(vt) + stsm_col * 128, store_swizzle = stsm_col % 8;
#pragma unroll 1
  for (uint32_t unit = warp; unit < kUnits; unit += kWarps) {
    const uint32_t group = unit % kGroups, pair = unit / kGroups;
    uint32_t r[4];
    if constexpr (kHoisted) {
      const uint32_t chunk = 2 * pair + load_chunk;
      device::ldmatrix_x4_trans(r, v_lane + group * 2048 + (chunk / 8) * S::kKvPanelBytes +
                                       (((chunk % 8) ^ load_swizzle) << 4));
    } else {
      const uint32_t chunk = 2 * pair + load_chunk;
      const uint32_t key = 16 * group + load_key;
      device::ldmatrix_x4_trans(r, device::smem_addr(v + (chunk / 8) * S::kKvPanelBytes +
                                                     device::swizzle128_offset(key, chunk % 8)));
    }
    if constexpr (!kWhole) {
      const int k0 = 16 * static_cast<int>(group) + 2 * t;  // bytes 0-1: key k0, 2-3: k0 + 1
      const uint32_t lo =
          (k0 < valid_keys ? 0x0000FFFFu : 0u) | (k0 + 1 < valid_keys ? 0xFFFF0000u : 0u);
      const uint32_t hi =
          (k0 + 8 < valid_keys ? 0x0000FFFFu : 0u) | (k0 + 9 < valid_keys ? 0xFFFF0000u : 0u);
      r[0] &= lo;
      r[1] &= hi;
      r[2] &= lo;
      r[3] &= hi;
    }
    uint8_t* panel = vt;  // one Vᵀ panel: at most 128 keys, 8 groups
    const uint32_t chunk = group;
    if constexpr (kStsm) {
      const uint32_t words[4] = {
          __byte_perm(r[0], r[1], first_sel), __byte_perm(r[0], r[1], second_sel),
          __byte_perm(r[2], r[3], first_sel), __byte_perm(r[2], r[3], second_sel)};
      if constexpr (kHoisted) {
        device::stmatrix_x4(words, vt_lane + pair * 4096 + ((group ^ store_swizzle) << 4));
      } else {
        device::stmatrix_x4(words, device::smem_addr(panel + device::swizzle128_offset(
                                                                 32 * pair + stsm_col, chunk)));
      }
    } else {
#pragma unroll
      for (int m = 0; m < 2; ++m) {  // matrices 2m, 2m + 1: chunk 2 pair + m
        const uint32_t col0 = 16 * (2 * pair + m);
        *reinterpret_cast<uint32_t*>(panel + device::swizzle128_offset(col0 + first_col, chunk) +
                                     4 * t) = __byte_perm(r[2 * m], r[2 * m + 1], first_sel);
        *reinterpret_cast<uint32_t*>(panel + device::swizzle128_offset(col0 + second_col, chunk) +
                                     4 * t) = __byte_perm(r[2 * m], r[2 * m + 1], second_sel);
      }
    }
  }
}

}  // namespace pagedattn::kernels::attention::v3
