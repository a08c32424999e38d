#include "plan/decode_plan.h"

#include <algorithm>
#include <climits>
#include <string>

#include "plan/decode_cut_plan.h"
#include "plan/decode_whole_plan.h"

namespace pagedattn::plan {
namespace {

using kernels::DecodeMergeItem;
using kernels::DecodePlanHeader;
using kernels::DecodeWorkUnit;
using kernels::kDecodeRowsPerTile;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

int64_t units_offset(int num_ctas) {
  return kernels::kDecodePlanCtaBeginOffset + align16(int64_t{num_ctas + 1} * 4);
}

using detail::capacity_error;
using detail::KeyRange;
using detail::visible_keys;

}  // namespace

DecodePlanLimits decode_plan_limits(const DecodePlanConfig& config, int max_decode_reqs,
                                    int max_decode_tokens, int max_model_len) {
  DecodePlanLimits l;
  l.num_ctas = std::max(1, config.num_ctas);
  const int64_t group = config.num_heads / std::max(1, config.num_kv_heads);
  // Sum over requests of ceil(q_len * G / 16) <= requests + tokens * G / 16.
  const int64_t tiles = max_decode_reqs + ceil_div(int64_t{max_decode_tokens} * group,
                                                    kDecodeRowsPerTile);
  const int64_t segments = int64_t{config.num_kv_heads} * tiles;
  const int64_t rows = int64_t{config.num_heads} * max_decode_tokens;  // all packed rows
  if (config.fixed_chunk_tokens > 0) {
    const int64_t pieces = ceil_div(max_model_len, config.fixed_chunk_tokens) + 1;
    l.max_units = segments * pieces + l.num_ctas;
    l.max_partial_rows = rows * pieces;
  } else {
    // Every cut closes a CTA: at most num_ctas - 1 cuts, so at most 2 (num_ctas - 1) pieces of
    // cut segments, of at most 16 rows each.
    l.max_units = segments + l.num_ctas;
    l.max_partial_rows = std::min<int64_t>(rows * (2 * int64_t{l.num_ctas} + 2),
                                           (2 * int64_t{l.num_ctas} + 2) * kDecodeRowsPerTile);
  }
  l.max_merges = segments;
  // Units and merges (32 bytes each), a merge index per unit, a finished-piece count per merge,
  // the pool's counters.
  l.plan_bytes = units_offset(l.num_ctas) +
                 (l.max_units + l.max_merges) * static_cast<int64_t>(sizeof(DecodeWorkUnit)) +
                 align16(l.max_units * 4) + align16(l.max_merges * 4) +
                 align16(sizeof(kernels::DecodePoolCounters));
  return l;
}

StatusOr<DecodePlanStats> plan_decode(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      const DecodePlanConfig& config,
                                      const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                                      void* plan) {
  scratch.requests.resize(seq_lens.size());
  for (size_t r = 0; r < seq_lens.size(); ++r) scratch.requests[r] = static_cast<int32_t>(r);
  return plan_decode(query_start_loc, seq_lens, scratch.requests, config, limits, scratch, plan);
}

StatusOr<DecodePlanStats> plan_decode(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      std::span<const int32_t> requests,
                                      const DecodePlanConfig& config,
                                      const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                                      void* plan) {
  const int n = static_cast<int>(seq_lens.size());
  if (query_start_loc.size() != seq_lens.size() + 1) {
    return invalid_argument("decode plan: query_start_loc has " +
                            std::to_string(query_start_loc.size()) +
                            " entries; expected num_reqs + 1 = " + std::to_string(n + 1));
  }
  for (const int32_t r : requests) {
    if (r < 0 || r >= n) {
      return invalid_argument("decode plan: request index " + std::to_string(r) +
                              " (allowed: 0 to num_reqs - 1 = " + std::to_string(n - 1) + ")");
    }
  }
  if (config.num_kv_heads <= 0 || config.num_heads % config.num_kv_heads != 0 ||
      config.num_ctas != limits.num_ctas) {
    return invalid_argument("decode plan: heads " + std::to_string(config.num_heads) + "/" +
                            std::to_string(config.num_kv_heads) + ", num_ctas " +
                            std::to_string(config.num_ctas) + " (limits: " +
                            std::to_string(limits.num_ctas) + ")");
  }
  const int group = config.num_heads / config.num_kv_heads;
  const int64_t c0 = config.unit_overhead_tokens;
  int64_t total = 0;
  for (const int r : requests) {
    const int q_len = query_start_loc[r + 1] - query_start_loc[r];
    if (q_len < 0 || q_len > kMaxDecodeQueryLen || seq_lens[r] < q_len) {
      return invalid_argument("decode plan: request " + std::to_string(r) + " has query_len " +
                              std::to_string(q_len) + " and seq_len " +
                              std::to_string(seq_lens[r]) + "; expected 0 <= query_len <= " +
                              std::to_string(kMaxDecodeQueryLen) + " and query_len <= seq_len");
    }
    for (int row0 = 0; row0 < q_len * group; row0 += kDecodeRowsPerTile) {
      const int rows = std::min(kDecodeRowsPerTile, q_len * group - row0);
      const KeyRange k = visible_keys(q_len, seq_lens[r], group, row0, rows, config.window_left);
      const int64_t pieces =
          config.fixed_chunk_tokens > 0
              ? (k.hi - 1) / config.fixed_chunk_tokens - k.lo / config.fixed_chunk_tokens + 1
              : 1;
      total += config.num_kv_heads * (k.hi - k.lo + c0 * pieces);
    }
  }

  // Longest visible range first; equal lengths keep batch order (the index breaks ties).
  std::vector<int64_t>& order = scratch.order;
  order.clear();
  for (const int r : requests) {
    const int q_len = query_start_loc[r + 1] - query_start_loc[r];
    const int visible = config.window_left >= 0 ? std::min(seq_lens[r], config.window_left + q_len)
                                                : seq_lens[r];
    order.push_back((int64_t{INT32_MAX - visible} << 32) | r);
  }
  std::sort(order.begin(), order.end());

  char* base = static_cast<char*>(plan);
  auto* header = reinterpret_cast<DecodePlanHeader*>(base);
  auto* cta_begin = reinterpret_cast<int32_t*>(base + kernels::kDecodePlanCtaBeginOffset);
  const int64_t unit_off = units_offset(limits.num_ctas);
  auto* units = reinterpret_cast<DecodeWorkUnit*>(base + unit_off);
  scratch.merges.clear();
  scratch.merge_units.clear();
  int64_t partial_rows = 0;
  int num_units = 0, pool_units = 0;
  int64_t max_cost = 0;
  detail::CutPlan cuts;

  // Uncut (decode_whole_plan.h) when the segments dealt whole stay within cut_penalty_tokens of an
  // equal share: then in the pool if there are kWholePoolRatio segments per CTA, else in lists.
  std::vector<detail::WholeRowTile>& tiles = scratch.row_tiles;
  tiles.clear();
  if (config.fixed_chunk_tokens == 0 && config.cut_penalty_tokens > 0) {
    detail::collect_row_tiles(order, query_start_loc.data(), seq_lens.data(), group,
                              config.window_left, tiles);
  }
  // The penalty at most an eighth of the share: small batches, whose CTAs run briefly, keep their
  // cuts (the penalty is a cost against CTAs that stream long).
  const int64_t segments = static_cast<int64_t>(tiles.size()) * config.num_kv_heads;
  const int64_t share = ceil_div(total, config.num_ctas);
  if (!tiles.empty() &&
      detail::snake_makespan_bound(tiles, config.num_kv_heads, config.num_ctas, c0) <=
          share + std::min<int64_t>(config.cut_penalty_tokens, share / 8)) {
    const bool pool = segments >= int64_t{kWholePoolRatio} * config.num_ctas;
    num_units = detail::write_whole_plan(tiles, query_start_loc.data(), seq_lens.data(),
                                         config.num_kv_heads, config.num_ctas, c0, pool,
                                         limits.max_units, cta_begin, units, &max_cost);
    if (num_units < 0) return capacity_error("work units", segments, limits.max_units);
    pool_units = pool ? num_units : 0;
  } else {
    PAGEDATTN_RETURN_IF_ERROR(detail::plan_with_cuts(order, query_start_loc, seq_lens, config, total,
                                             limits, scratch, cta_begin, units, cuts));
    num_units = cuts.num_units;
    max_cost = cuts.max_cost;
    partial_rows = cuts.partial_rows;
  }
  const int num_merges = static_cast<int>(scratch.merges.size());
  if (num_merges > limits.max_merges) {
    return capacity_error("merges", num_merges, limits.max_merges);
  }
  const int64_t merge_off = unit_off + int64_t{num_units} * sizeof(DecodeWorkUnit);
  std::copy(scratch.merges.begin(), scratch.merges.end(),
            reinterpret_cast<DecodeMergeItem*>(base + merge_off));
  *header = {num_units, num_merges, static_cast<int32_t>(unit_off),
             static_cast<int32_t>(merge_off)};
  auto* unit_merge = reinterpret_cast<int32_t*>(base + kernels::decode_unit_merge_offset(*header));
  std::fill_n(unit_merge, num_units, -1);
  for (int m = 0; m < num_merges; ++m) {
    for (int k = 0; k < scratch.merges[m].num_pieces; ++k) {
      unit_merge[scratch.merge_units[m] + k] = m;
    }
  }
  std::fill_n(reinterpret_cast<int32_t*>(base + kernels::decode_merge_done_offset(*header)),
              num_merges, 0);
  int32_t pool_min_keys = pool_units > 0 ? INT32_MAX : 0;
  for (int u = num_units - pool_units; u < num_units; ++u) {
    pool_min_keys = std::min(pool_min_keys, units[u].kv_end - units[u].kv_begin);
  }
  *reinterpret_cast<kernels::DecodePoolCounters*>(
      base + kernels::decode_pool_counters_offset(*header)) = {0, 0, pool_min_keys, 0};

  DecodePlanStats stats;
  stats.num_units = num_units;
  stats.num_merges = num_merges;
  stats.partial_rows = partial_rows;
  stats.bytes_used = kernels::decode_plan_end(*header);
  stats.max_cta_cost = max_cost;
  stats.pool_units = pool_units;
  return stats;
}

}  // namespace pagedattn::plan
