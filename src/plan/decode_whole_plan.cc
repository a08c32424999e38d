#include "plan/decode_whole_plan.h"

#include <algorithm>

namespace pagedattn::plan::detail {

void collect_row_tiles(const std::vector<int64_t>& order, const int32_t* qsl,
                       const int32_t* seq_lens, int group, int window_left,
                       std::vector<WholeRowTile>& tiles) {
  for (const int64_t key : order) {
    const int r = static_cast<int>(key & 0xFFFFFFFF);
    const int q_len = qsl[r + 1] - qsl[r];
    for (int row0 = 0; row0 < q_len * group; row0 += kernels::kDecodeRowsPerTile) {
      const int rows = std::min(kernels::kDecodeRowsPerTile, q_len * group - row0);
      const KeyRange k = visible_keys(q_len, seq_lens[r], group, row0, rows, window_left);
      tiles.push_back({r, row0, k.lo, k.hi});
    }
  }
}

int64_t snake_makespan_bound(const std::vector<WholeRowTile>& tiles, int num_kv_heads,
                             int num_ctas, int64_t overhead) {
  const int64_t segments = static_cast<int64_t>(tiles.size()) * num_kv_heads;
  int64_t bound = 0;
  for (int64_t first = 0; first < segments; first += num_ctas) {
    const WholeRowTile& t = tiles[static_cast<size_t>(first / num_kv_heads)];
    bound += t.hi - t.lo + overhead;
  }
  return bound;
}

int write_whole_plan(const std::vector<WholeRowTile>& tiles, const int32_t* qsl,
                     const int32_t* seq_lens, int num_kv_heads, int num_ctas, int64_t overhead,
                     bool pool, int64_t max_units, int32_t* cta_begin,
                     kernels::DecodeWorkUnit* units, int64_t* max_cost) {
  const int64_t segments = static_cast<int64_t>(tiles.size()) * num_kv_heads;
  if (segments > max_units) return -1;
  int written = 0;
  auto emit = [&](int64_t segment) {
    const WholeRowTile& t = tiles[static_cast<size_t>(segment / num_kv_heads)];
    kernels::DecodeWorkUnit& u = units[written++];
    u.req = t.req;
    u.q_start = qsl[t.req];
    u.q_len = qsl[t.req + 1] - qsl[t.req];
    u.kv_len = seq_lens[t.req];
    u.head_row = kernels::decode_head_row(static_cast<int>(segment % num_kv_heads), t.row0);
    u.kv_begin = t.lo;
    u.kv_end = t.hi;
    u.partial = -1;
    return t.hi - t.lo + overhead;
  };
  *max_cost = 0;
  if (pool) {
    std::fill_n(cta_begin, num_ctas + 1, 0);
    for (int64_t s = 0; s < segments; ++s) emit(s);
    return written;
  }
  const int64_t rounds = (segments + num_ctas - 1) / num_ctas;
  for (int c = 0; c < num_ctas; ++c) {
    cta_begin[c] = written;
    int64_t cost = 0;
    for (int64_t r = 0; r < rounds; ++r) {
      const int64_t s = r * num_ctas + (r % 2 == 0 ? c : num_ctas - 1 - c);
      if (s < segments) cost += emit(s);
    }
    *max_cost = std::max(*max_cost, cost);
  }
  cta_begin[num_ctas] = written;
  return written;
}

}  // namespace pagedattn::plan::detail
