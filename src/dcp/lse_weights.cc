// lse_weights: the LSE merge of N ranks for one row.
#include "dcp/lse_weights.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagedattn::dcp {

float lse_weights(std::span<const float> lses, std::span<float> weights) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float max_lse = -kInf;
  for (float lse : lses) {
    if (std::isnan(lse)) {
      std::fill(weights.begin(), weights.end(), std::numeric_limits<float>::quiet_NaN());
      return lse;
    }
    if (!std::isinf(lse)) max_lse = std::max(max_lse, lse);
  }
  std::fill(weights.begin(), weights.end(), 0.0f);
  if (max_lse == -kInf) {  // no rank has a key: merge_attn_states keeps the first side
    weights[0] = 1.0f;
    return -kInf;
  }
  float sum = 0.0f;
  for (size_t i = 0; i < lses.size(); ++i) {
    if (!std::isinf(lses[i])) {
      weights[i] = std::exp(lses[i] - max_lse);
      sum += weights[i];
    }
  }
  for (float& w : weights) w /= sum;
  return max_lse + std::log(sum);
}

}  // namespace pagedattn::dcp
