// The rule merge_attn_states applies to one row: two partial attentions over disjoint keys,
// each with its natural-log LSE, weighted into the attention over all of them.
#pragma once

#include <cmath>
#include <limits>

namespace pagedattn {

struct LseMerge {
  float lse;
  float prefix_weight;
  float suffix_weight;
};

inline LseMerge merge_lse(float prefix_lse, float suffix_lse) {
  // +inf (an empty row in FlashAttention 2) and -inf both mean "no keys on this side".
  const float none = -std::numeric_limits<float>::infinity();
  const float p = std::isinf(prefix_lse) ? none : prefix_lse;
  const float s = std::isinf(suffix_lse) ? none : suffix_lse;
  const float m = std::fmax(p, s);
  if (std::isinf(m)) return {m, 1.0f, 0.0f};  // both empty: keep the prefix output, never NaN
  const float pe = std::exp(p - m);
  const float se = std::exp(s - m);
  const float sum = pe + se;
  return {std::log(sum) + m, pe / sum, se / sum};
}

}  // namespace pagedattn
