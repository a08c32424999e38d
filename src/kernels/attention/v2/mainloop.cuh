// The per-warp compute of the v2 paged attention kernel: S = Q K^T with mma.sync, the score
// transforms and visibility mask of mask.h, the online softmax and O += P V with P kept in
// registers. Fragment layouts: PTX "Matrix Fragments for mma.m16n8k16"; docs/kernels/v2_prefill.md.
#pragma once

#include <cmath>

#include "device/convert.cuh"
#include "device/mma.cuh"
#include "common/mask.h"
#include "kernels/attention/v2/accumulator.cuh"
#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

// Score transform and visibility, uniform over the CTA.
struct ScoreParams {
  float qk_scale;  // softmax scale * k_scale
  float softcap;   // <= 0: none
  bool alibi;
  float softmax_scale;  // factor from the scores left by compute_scores to base-2 logits
};

// S (this warp's rows x its kWarpKeys keys of the tile) = Q K^T, then scores in base 2, masked.
template <typename Cfg, typename T>
__device__ __forceinline__ void compute_scores(float (&s)[Cfg::kMT][Cfg::kWarpKeys / 8][4],
                                               uint32_t q_smem, uint32_t k_smem, int tile_key0,
                                               bool need_mask, const ScoreParams& sp,
                                               const KernelArgs& a, const CtaWork& w) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;
  const int key_base = wn * Cfg::kWarpKeys;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Cfg::kWarpKeys / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[mt][nt][i] = 0.0f;

#pragma unroll
  for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
    uint32_t qa[Cfg::kMT][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt) {
      const int row = (wm * Cfg::kMT + mt) * 16 + lane % 16;
      device::ldmatrix_x4(qa[mt], q_smem + row * Cfg::kQRowBytes + (2 * kk + lane / 16) * 16);
    }
#pragma unroll
    for (int np = 0; np < Cfg::kWarpKeys / 16; ++np) {
      uint32_t kb[4];
      const int key = key_base + np * 16 + (lane % 8) + 8 * (lane / 16);
      device::ldmatrix_x4(kb, k_smem + key * Cfg::kQRowBytes + (2 * kk + (lane / 8) % 2) * 16);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMT; ++mt) {
        device::mma_16816<T>(s[mt][2 * np], qa[mt], kb[0], kb[1]);
        device::mma_16816<T>(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
      }
    }
  }

  // Each feature is its own loop behind a CTA-uniform branch. Without soft cap and ALiBi the
  // scores stay raw and the softmax folds the scale into its exp2 FFMA (sp.softmax_scale).
  constexpr int kNT = Cfg::kWarpKeys / 8;
  if (sp.softcap > 0.0f) {
    const mask::SoftCap<float> cap = mask::make_soft_cap(sp.qk_scale, sp.softcap, kLog2e);
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[mt][nt][i] = mask::soft_capped(cap, s[mt][nt][i]);
  } else if (sp.alibi) {
    const float plain = sp.qk_scale * kLog2e;
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[mt][nt][i] *= plain;
  }
  // Row positions are recomputed here (rarely-taken paths) rather than kept in registers.
  const int key_lane = tile_key0 + key_base + 2 * (lane % 4);
  if (sp.alibi || need_mask) {
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int gr = w.row0 + (wm * Cfg::kMT + mt) * 16 + lane / 4 + 8 * h;
        const int pos = w.ctx + gr / a.group;
        if (sp.alibi) {
          const float slope2 = a.p.alibi_slopes[w.kv_head * a.group + gr % a.group] * kLog2e;
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int key = key_lane + nt * 8 + j;
              s[mt][nt][2 * h + j] -= mask::alibi_bias(slope2, pos, key);
            }
        }
        if (need_mask) {
          const mask::KeyRange<int> visible = mask::visible_keys(a.p, w.kv_len, pos);
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int key = key_lane + nt * 8 + j;
              if (key > visible.hi || key < visible.lo) s[mt][nt][2 * h + j] = -INFINITY;
            }
        }
      }
  }
}

// How far (base 2) a row's maximum may rise above the reference the warp exponentiates against
// before O and l are rescaled. Exact either way (O, l and the LSE share the reference); the slack
// only bounds P <= 2^8, and it lets most tiles skip the rescale of O once the maxima settle.
constexpr float kRescaleSlack = 8.0f;

// Online softmax over the tile's scores, then O += P V (P rounded to T, straight from registers).
template <typename Cfg, typename T>
__device__ __forceinline__ void softmax_and_pv(float (&s)[Cfg::kMT][Cfg::kWarpKeys / 8][4],
                                               WarpAccum<Cfg>& acc, uint32_t v_smem, float c) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int key_base = (warp % Cfg::kWarpsN) * Cfg::kWarpKeys;
  constexpr int kNT = Cfg::kWarpKeys / 8;
  // Row maxima of the tile (base 2), as pairwise trees: short dependency chains.
  float tile_max[Cfg::kMT][2];
  bool grows = false;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float part[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) part[nt] = fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]);
#pragma unroll
      for (int stride = kNT / 2; stride > 0; stride /= 2)
#pragma unroll
        for (int nt = 0; nt < stride; ++nt) part[nt] = fmaxf(part[nt], part[nt + stride]);
      float mx = part[0];
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      tile_max[mt][h] = mx * c;
      grows |= tile_max[mt][h] > acc.m2[mt][h] + kRescaleSlack;
    }
  // Warp-uniform: either every row of the warp moves to its new maximum or none does.
  if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(acc.m2[mt][h], tile_max[mt][h]);
        // A row with nothing visible yet keeps m = -inf; alpha = exp2(-inf) = 0, never NaN.
        const float alpha = device::fast_exp2(acc.m2[mt][h] - (m_new == -INFINITY ? 0.0f : m_new));
        acc.m2[mt][h] = m_new;
        acc.l[mt][h] *= alpha;
#pragma unroll
        for (int dt = 0; dt < Cfg::kDV / 8; ++dt) {
          acc.o[mt][dt][2 * h] *= alpha;
          acc.o[mt][dt][2 * h + 1] *= alpha;
        }
      }
  }
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Rows that have seen nothing subtract 0: exp2(-inf) = 0.
      const float m_use = acc.m2[mt][h] == -INFINITY ? 0.0f : acc.m2[mt][h];
      float part[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        s[mt][nt][2 * h] = device::fast_exp2(fmaf(s[mt][nt][2 * h], c, -m_use));
        s[mt][nt][2 * h + 1] = device::fast_exp2(fmaf(s[mt][nt][2 * h + 1], c, -m_use));
        part[nt] = s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
      }
#pragma unroll
      for (int stride = kNT / 2; stride > 0; stride /= 2)
#pragma unroll
        for (int nt = 0; nt < stride; ++nt) part[nt] += part[nt + stride];
      acc.l[mt][h] += part[0];
    }

#pragma unroll
  for (int j = 0; j < Cfg::kWarpKeys / 16; ++j) {
    uint32_t pa[Cfg::kMT][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt) {
      pa[mt][0] = device::pack_float2<T>(s[mt][2 * j][0], s[mt][2 * j][1]);
      pa[mt][1] = device::pack_float2<T>(s[mt][2 * j][2], s[mt][2 * j][3]);
      pa[mt][2] = device::pack_float2<T>(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
      pa[mt][3] = device::pack_float2<T>(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < Cfg::kDV / 16; ++dp) {
      uint32_t vb[4];
      const int key = key_base + j * 16 + lane % 16;
      device::ldmatrix_x4_trans(vb, v_smem + key * Cfg::kVRowBytes + (2 * dp + lane / 16) * 16);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMT; ++mt) {
        device::mma_16816<T>(acc.o[mt][2 * dp], pa[mt], vb[0], vb[1]);
        device::mma_16816<T>(acc.o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
      }
    }
  }
}

}  // namespace pagedattn::kernels::attention::v2
