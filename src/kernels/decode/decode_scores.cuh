// Score transforms and visibility of the decode kernel (soft cap, ALiBi, sliding window, the
// unit's key range), applied to a warp's S fragments. Kept to what decode needs: queries are
// causal and sit at the end of their sequence.
#pragma once

#include <cmath>

#include "kernels/decode/decode_loads.cuh"

namespace pagedattn::kernels::decode {

constexpr float kLog2e = 1.4426950408889634f;

struct ScoreParams {
  float qk_scale;  // what the raw dot products still need (softmax scale, k_scale)
  float softcap;   // <= 0: none
  bool alibi;
  float exp_scale;  // raw score -> base-2 logit in the softmax (1 once transformed)
};

// S of one warp: kNT n8 tiles (8 keys each) of the 16-row tile, C fragment layout.
template <int kNT>
__device__ __forceinline__ void transform_scores(float (&s)[kNT][4], const ScoreParams& sp,
                                                 bool need_mask, const DecodeArgs& a,
                                                 const UnitWork& w, int key_base) {
  if (sp.softcap > 0.0f) {
    const float pre = sp.qk_scale / sp.softcap, post = sp.softcap * kLog2e;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] = post * tanhf(s[nt][i] * pre);
  } else if (sp.alibi) {
    const float plain = sp.qk_scale * kLog2e;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] *= plain;
  }
  if (!sp.alibi && !need_mask) return;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = w.row0 + lane / 4 + 8 * h;
    const int pos = w.kv_len - w.q_len + gr / a.group;
    const int lo = a.p.window_left >= 0 ? max(w.kv_begin, pos - a.p.window_left) : w.kv_begin;
    const int hi = min(pos, w.kv_end - 1);
    const float slope2 =
        sp.alibi ? a.p.alibi_slopes[w.kv_head * a.group + gr % a.group] * kLog2e : 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = key_base + nt * 8 + 2 * (lane % 4) + j;
        float& v = s[nt][2 * h + j];
        if (sp.alibi) v -= slope2 * fabsf(static_cast<float>(pos - key));
        if (need_mask && (key < lo || key > hi)) v = -INFINITY;
      }
  }
}

}  // namespace pagedattn::kernels::decode
