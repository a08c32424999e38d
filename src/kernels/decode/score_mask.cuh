// Score transforms and visibility of the decode kernel, over the shared definitions of
// common/mask.h (visible keys, soft cap, ALiBi), applied to a warp's S fragments and
// clipped to the unit's key range. Queries are causal and sit at the end of their sequence.
#pragma once

#include <cmath>

#include "common/mask.h"
#include "kernels/decode/mainloop_load.cuh"

namespace pagedattn::kernels::decode {

constexpr float kLog2e = 1.4426950408889634f;

struct ScoreParams {
  float qk_scale;  // what the raw dot products still need (softmax scale, k_scale)
  bool softcap;    // mask::soft_cap_applies
  mask::SoftCap<float> cap;  // folded with qk_scale and log2(e)
  bool alibi;
  float exp_scale;  // raw score -> base-2 logit in the softmax (1 once transformed)
};

// The keys the query at position pos sees among the unit's [kv_begin, kv_end).
__device__ __forceinline__ mask::KeyRange<int> unit_visible_keys(const DecodeArgs& a,
                                                                      const UnitWork& w, int pos) {
  const mask::MaskRule rule{true, a.p.window_left, -1};
  const mask::KeyRange<int> k = mask::visible_keys(rule, w.kv_len, pos);
  return {max(k.lo, w.kv_begin), min(k.hi, w.kv_end - 1)};
}

// S of one warp: kNT n8 tiles (8 keys each) of the 16-row tile, C fragment layout.
template <int kNT>
__device__ __forceinline__ void transform_scores(float (&s)[kNT][4], const ScoreParams& sp,
                                                 bool need_mask, const DecodeArgs& a,
                                                 const UnitWork& w, int key_base) {
  if (sp.softcap) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] = mask::soft_capped(sp.cap, s[nt][i]);
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
    const mask::KeyRange<int> vis = unit_visible_keys(a, w, pos);
    const float slope2 =
        sp.alibi ? a.p.alibi_slopes[w.kv_head * a.group + gr % a.group] * kLog2e : 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = key_base + nt * 8 + 2 * (lane % 4) + j;
        float& v = s[nt][2 * h + j];
        if (sp.alibi) v -= mask::alibi_bias(slope2, pos, key);
        if (need_mask && (key < vis.lo || key > vis.hi)) v = -INFINITY;
      }
  }
}

}  // namespace pagedattn::kernels::decode
