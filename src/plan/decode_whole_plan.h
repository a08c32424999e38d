// Decode plans without cuts (internal to decode_plan.cc): every (request, KV head, row tile)
// segment is one work unit, dealt longest first either round by round to the CTAs' static lists
// (snake order: round r gives segment r * n + c to CTA c, reversed on odd rounds) or into the shared
// pool that the CTAs take from in order. A cut piece costs its partial, its count and its share of
// a merge, so a batch whose segments fit the CTAs nearly evenly whole runs faster uncut.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/decode/work.h"

namespace pagedattn::plan::detail {

// The keys [lo, hi) that rows [row0, row0 + rows) of a request can see (causal, window).
struct KeyRange {
  int lo;
  int hi;
};
inline KeyRange visible_keys(int q_len, int kv_len, int group, int row0, int rows,
                             int window_left) {
  // A request in one tile (q_len * group <= 16: every decode of the usual models) spans all its
  // tokens: no divisions.
  const bool whole = row0 == 0 && rows == q_len * group;
  const int first_pos = kv_len - q_len + (whole ? 0 : row0 / group);
  const int last_pos = kv_len - q_len + (whole ? q_len - 1 : (row0 + rows - 1) / group);
  return {window_left >= 0 ? std::max(0, first_pos - window_left) : 0, last_pos + 1};
}

// One row tile of a request (every KV head of it is a segment): its keys [lo, hi).
struct WholeRowTile {
  int32_t req;
  int32_t row0;
  int32_t lo;
  int32_t hi;
};

// The row tiles of the requests in `order` (sort keys whose low 32 bits are the request), with
// their visible keys.
void collect_row_tiles(const std::vector<int64_t>& order, const int32_t* qsl,
                       const int32_t* seq_lens, int group, int window_left,
                       std::vector<WholeRowTile>& tiles);

// The largest CTA cost of the snake deal of the row tiles' segments (heads fastest, row tiles as
// given: longest first) over num_ctas CTAs, bounded by the sum over rounds of each round's first
// (largest) segment; each unit costs its keys plus `overhead`.
int64_t snake_makespan_bound(const std::vector<WholeRowTile>& tiles, int num_kv_heads,
                             int num_ctas, int64_t overhead);

// Writes every segment whole as a unit (partial -1) and cta_begin [num_ctas + 1]: the snake deal
// into static lists (pool = false) or all of them into the pool (cta_begin all 0). `qsl` and
// `seq_lens` give a request's query start, query length and keys. Returns the units written, or -1
// past max_units; *max_cost: the largest static list's cost.
int write_whole_plan(const std::vector<WholeRowTile>& tiles, const int32_t* qsl,
                     const int32_t* seq_lens, int num_kv_heads, int num_ctas, int64_t overhead,
                     bool pool, int64_t max_units, int32_t* cta_begin,
                     kernels::DecodeWorkUnit* units, int64_t* max_cost);

}  // namespace pagedattn::plan::detail
