// One online-softmax state and its merge rule, shared by the attention kernels, the split-KV
// combine and the merge_attn_states kernel. A state over a set of scores s_j is
//   m = max s_j,  d = sum_j exp(s_j - m),  o = sum_j exp(s_j - m) v_j / d   (natural log),
// and lse = m + ln d. The empty state is m = -inf, d = 0 (lse = -inf); +inf LSEs are treated as
// empty too (merge_attn_states' convention). Merging is exact up to rounding and associative.
#pragma once

#include <cmath>

namespace pagedattn::device {

// Weights of two partial results given their LSEs, so that the merged output is
// w_a * o_a + w_b * o_b. Both empty: w_a = 1, w_b = 0 and lse = -inf (the first side wins).
struct MergeWeights {
  float w_a;
  float w_b;
  float lse;  // merged, natural log; -inf when both sides are empty
};

__host__ __device__ __forceinline__ bool lse_is_empty(float lse) {
  return isinf(lse) || isnan(lse);
}

__host__ __device__ __forceinline__ MergeWeights merge_weights(float lse_a, float lse_b) {
  const bool empty_a = lse_is_empty(lse_a), empty_b = lse_is_empty(lse_b);
  if (empty_a && empty_b) return {1.0f, 0.0f, -INFINITY};
  if (empty_b) return {1.0f, 0.0f, lse_a};
  if (empty_a) return {0.0f, 1.0f, lse_b};
  const float m = fmaxf(lse_a, lse_b);
  const float ea = expf(lse_a - m), eb = expf(lse_b - m);
  const float inv = 1.0f / (ea + eb);
  return {ea * inv, eb * inv, m + logf(ea + eb)};
}

// Running merge of many LSE-weighted parts: feed (lse_i) to add(), then weight(lse_i) gives each
// part's weight in the normalized sum. Empty parts (+-inf) get weight 0.
struct LseAccumulator {
  float m = -INFINITY;  // max over non-empty parts
  float sum = 0.0f;     // sum of exp(lse_i - m)

  __host__ __device__ __forceinline__ void add(float lse) {
    if (lse_is_empty(lse)) return;
    if (lse > m) {
      sum = sum * expf(m - lse) + 1.0f;
      m = lse;
    } else {
      sum += expf(lse - m);
    }
  }
  __host__ __device__ __forceinline__ bool empty() const { return sum == 0.0f; }
  __host__ __device__ __forceinline__ float weight(float lse) const {
    return (lse_is_empty(lse) || empty()) ? 0.0f : expf(lse - m) / sum;
  }
  __host__ __device__ __forceinline__ float lse() const {
    return empty() ? -INFINITY : m + logf(sum);
  }
};

}  // namespace pagedattn::device
