// The scores of a v3 prefill consumer's S tile before the softmax (v3/softmax.cuh): the
// score transforms (soft cap, ALiBi: ScoreRule in v3/traits.cuh, mask.h's order) and the mask
// of keys a row does not see. The kTransform kernel transforms every tile; both kernels mask only
// the tiles that cross a row's visible range (Consumer::scores_to_p).
//
// Element 4j + 2h + e of S is row h (g or g + 8 of the warp's 16), key 8j + 2t + e of the tile,
// t the thread's lane in its quad (wgmma.cuh).
#pragma once

#include <cmath>
#include <cstdint>

#include "common/mask.h"
#include "kernels/attention/v3/rows.cuh"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

// tanh on the SFU (one instruction, relative error below 2^-10.9): the soft cap runs once per
// score, and tanhf's ~20 instructions each would outlast the other warpgroup's products.
__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// score(x) of every raw score x, minus ALiBi's slope * |distance|, pos the absolute position of
// row g. The distance is mask.h's |pos - key| (alibi_bias) formed in float from one conversion per
// row and stepped key by key: exact (small integers), an add and an FMA per score instead of a
// conversion each, and a chain ptxas does not hoist into 64 registers. One pass over S: the soft
// cap's and ALiBi's loops one after the other spilled at D 256 (ptxas -v).
template <int kRegs, typename Score>
__device__ __forceinline__ void biased_scores(float (&s)[kRegs], float slope, int pos, int key0,
                                              Score score) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float distance = static_cast<float>(pos + 8 * h - key0 - 2 * t);
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = fmaf(-slope, fabsf(distance), score(x));
        distance -= e == 0 ? 1.0f : 7.0f;
      }
    }
  }
}

// Raw scores to the rule's units (ScoreRule): the soft cap, then ALiBi's bias (slope: the tile's
// head's slope in score units; 0 without ALiBi). The branches are uniform over the CTA and taken
// once per tile; the rule's fields stay kernel parameters (no registers).
template <int kRegs>
__device__ __forceinline__ void transform_scores(float (&s)[kRegs], const ScoreRule& rule,
                                                 float slope, int pos, int key0) {
  const auto capped = [&](float x) { return fast_tanh(x * rule.cap_pre); };
  if (!rule.capped) {
    biased_scores(s, slope, pos, key0, [](float x) { return x; });
  } else if (slope != 0.0f) {
    biased_scores(s, slope, pos, key0, capped);
  } else {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i] = capped(s[i]);
  }
}

// Keys a row does not see (mask.h: past k_len, causally past its position, outside its window)
// score -inf: a select, so NaN in unused page slots cannot leak. `rows`: the thread's two rows.
template <int kRegs>
__device__ __forceinline__ void mask_tile(float (&s)[kRegs], const PrefillArgs& a,
                                          const PrefillTile& w, const ThreadRows& rows, int key0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const mask::KeyRange<int> seen = mask::visible_keys(a.mask, w.k_len, rows.pos[h] + w.k_len - w.q_len);
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * j + 2 * t + e;
        if (key < seen.lo || key > seen.hi) s[4 * j + 2 * h + e] = -INFINITY;
      }
    }
  }
}
// An unpacked tile's rows: `row` is row g within the request.
template <int kRegs>
__device__ __forceinline__ void mask_tile(float (&s)[kRegs], const PrefillArgs& a,
                                          const PrefillTile& w, int row, int key0) {
  mask_tile(s, a, w, unpacked_rows(w, row), key0);
}

}  // namespace pagedattn::kernels::attention::v3
