// Test support for the DCP combine: random decode rows, their exact attention in float64, and each
// rank's partial attention over the keys it stores (dcp_owner_rank), as a backend would return them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn::testing {

// T decode rows; row t has its own lengths[t] keys. Query head h reads KV head h / (H / Hkv).
struct DcpRows {
  int64_t num_tokens, num_heads, num_kv_heads, head_size;
  std::vector<int64_t> lengths;
  std::vector<double> q;     // [T, H, D]
  std::vector<double> k, v;  // per row: [L_t, Hkv, D], concatenated
  std::vector<int64_t> key_start;

  static DcpRows random(int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads,
                        int64_t head_size, std::vector<int64_t> lengths, uint32_t seed) {
    DcpRows rows{num_tokens, num_heads, num_kv_heads, head_size, std::move(lengths), {}, {}, {}, {}};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    rows.q.resize(num_tokens * num_heads * head_size);
    for (auto& x : rows.q) x = 2.0 * uniform(rng);  // scores spread enough to test the weighting
    int64_t keys = 0;
    for (int64_t length : rows.lengths) {
      rows.key_start.push_back(keys);
      keys += length;
    }
    rows.k.resize(keys * num_kv_heads * head_size);
    rows.v.resize(keys * num_kv_heads * head_size);
    for (auto& x : rows.k) x = uniform(rng);
    for (auto& x : rows.v) x = uniform(rng);
    return rows;
  }

  // Attention of every (row, head) over the keys `keep(j)` selects: out [T, H, D], lse [H, T]
  // (-inf and out 0 where no key is kept), rounded to float.
  template <typename Keep>
  void attend(Keep keep, std::vector<float>& out, std::vector<float>& lse) const {
    out.assign(num_tokens * num_heads * head_size, 0.0f);
    lse.assign(num_heads * num_tokens, -std::numeric_limits<float>::infinity());
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_size));
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t h = 0; h < num_heads; ++h) {
        const int64_t g = h / (num_heads / num_kv_heads);
        std::vector<double> scores;
        std::vector<int64_t> keys;
        for (int64_t j = 0; j < lengths[t]; ++j) {
          if (!keep(j)) continue;
          double s = 0.0;
          for (int64_t d = 0; d < head_size; ++d) {
            s += q[(t * num_heads + h) * head_size + d] * k[((key_start[t] + j) * num_kv_heads + g) * head_size + d];
          }
          scores.push_back(s * scale);
          keys.push_back(j);
        }
        if (scores.empty()) continue;
        double m = -std::numeric_limits<double>::infinity();
        for (double s : scores) m = std::max(m, s);
        double denominator = 0.0;
        std::vector<double> acc(head_size, 0.0);
        for (size_t i = 0; i < scores.size(); ++i) {
          const double p = std::exp(scores[i] - m);
          denominator += p;
          for (int64_t d = 0; d < head_size; ++d) {
            acc[d] += p * v[((key_start[t] + keys[i]) * num_kv_heads + g) * head_size + d];
          }
        }
        for (int64_t d = 0; d < head_size; ++d) {
          out[(t * num_heads + h) * head_size + d] = static_cast<float>(acc[d] / denominator);
        }
        lse[h * num_tokens + t] = static_cast<float>(m + std::log(denominator));
      }
    }
  }
};

}  // namespace pagedattn::testing
