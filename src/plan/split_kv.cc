#include "plan/split_kv.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/attention/v2/tile_geometry.h"

namespace pagedattn::plan {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Useful work per launched CTA slot when `ctas` CTAs run one per SM: the last wave's emptiness.
double wave_efficiency(int64_t ctas, int num_sms) {
  const double waves = static_cast<double>(ctas) / num_sms;
  return waves / std::ceil(waves);
}

}  // namespace

int min_blocks_per_split(int block_size) {
  return static_cast<int>(std::max<int64_t>(1, ceil_div(kMinKeysPerSplit, block_size)));
}

int64_t request_ctas(int query_len, int num_heads, int num_kv_heads, int head_size) {
  if (query_len <= 0 || num_kv_heads <= 0) return 0;
  const int64_t group = num_heads / num_kv_heads;
  return kernels::attention::v2::request_ctas(int64_t{query_len} * group, head_size, num_kv_heads);
}

int choose_num_splits(int64_t splittable_ctas, int64_t fixed_ctas, int max_kv_blocks,
                      int min_blocks_per_split, int num_sms, int max_splits) {
  if (splittable_ctas <= 0 || num_sms <= 0 || max_splits <= 1) return 1;
  if (splittable_ctas + fixed_ctas >= kEnoughWaveFraction * num_sms) return 1;
  const int64_t by_length = max_kv_blocks / std::max(1, min_blocks_per_split);
  const int64_t by_waves = ceil_div(int64_t{kMaxWaves} * num_sms, splittable_ctas);
  const int max_useful = static_cast<int>(std::min<int64_t>({max_splits, by_length, by_waves}));
  if (max_useful <= 1) return 1;

  // A count is worth considering only if it shortens the longest split (FlashAttention-2's rule).
  auto eligible = [&](int s) {
    return s == 1 || ceil_div(max_kv_blocks, s) != ceil_div(max_kv_blocks, s - 1);
  };
  auto efficiency = [&](int s) {
    return wave_efficiency(splittable_ctas * s + fixed_ctas, num_sms);
  };
  double best = 0.0;
  for (int s = 1; s <= max_useful; ++s) {
    if (eligible(s)) best = std::max(best, efficiency(s));
  }
  for (int s = 1; s <= max_useful; ++s) {
    if (eligible(s) && efficiency(s) >= kEfficiencyTolerance * best) return s;
  }
  return 1;
}

StatusOr<SplitSchedule> plan_split_kv(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      const SplitKVConfig& config) {
  const size_t num_reqs = seq_lens.size();
  if (query_start_loc.size() != num_reqs + 1) {
    return invalid_argument("query_start_loc has " + std::to_string(query_start_loc.size()) +
                            " entries; expected num_reqs + 1 = " + std::to_string(num_reqs + 1));
  }
  if (config.block_size <= 0 || config.num_kv_heads <= 0 || config.num_heads <= 0 ||
      config.num_heads % config.num_kv_heads != 0) {
    return invalid_argument("split config: block_size " + std::to_string(config.block_size) +
                            ", heads " + std::to_string(config.num_heads) + "/" +
                            std::to_string(config.num_kv_heads) +
                            "; expected positive values with num_heads % num_kv_heads == 0");
  }
  const int min_blocks = min_blocks_per_split(config.block_size);
  SplitSchedule schedule;
  // First each request's KV blocks when it may be split, 0 when not (a splittable request has
  // at least 2 * min_blocks); then its split count. One vector, no other allocation per step.
  std::vector<int32_t>& splits = schedule.num_splits_per_req;
  splits.resize(num_reqs);
  int64_t splittable_ctas = 0, fixed_ctas = 0;
  int max_blocks = 0;
  const uint32_t block_size = static_cast<uint32_t>(config.block_size);
  int last_q_len = -1;  // consecutive requests mostly share a query length (decodes: 1)
  int64_t last_ctas = 0;
  for (size_t r = 0; r < num_reqs; ++r) {
    const int q_len = query_start_loc[r + 1] - query_start_loc[r];
    if (q_len < 0 || seq_lens[r] < q_len) {
      return invalid_argument("request " + std::to_string(r) + ": query_len " +
                              std::to_string(q_len) + ", seq_len " + std::to_string(seq_lens[r]) +
                              "; expected 0 <= query_len <= seq_len");
    }
    const int64_t keys = config.window_left >= 0
                             ? std::min<int64_t>(seq_lens[r], int64_t{config.window_left} + q_len)
                             : seq_lens[r];
    // keys <= seq_len < 2^31: a 32-bit division (ceil(keys / block_size)).
    const int blocks =
        static_cast<int>(keys == 0 ? 0 : (static_cast<uint32_t>(keys) - 1) / block_size + 1);
    if (q_len != last_q_len) {
      last_q_len = q_len;
      last_ctas = request_ctas(q_len, config.num_heads, config.num_kv_heads, config.head_size);
    }
    const bool short_query =
        q_len >= 1 && (q_len <= kMaxSplitQueryLen || config.split_long_queries);
    const bool splittable = short_query && blocks >= 2 * min_blocks;
    splits[r] = splittable ? blocks : 0;
    if (splittable) {
      splittable_ctas += last_ctas;
      max_blocks = std::max(max_blocks, blocks);
    } else {
      fixed_ctas += last_ctas;
    }
  }
  schedule.num_ctas_unsplit = splittable_ctas + fixed_ctas;
  const int global = choose_num_splits(splittable_ctas, fixed_ctas, max_blocks, min_blocks,
                                       config.num_sms, std::max(1, config.max_splits));
  for (size_t r = 0; r < num_reqs; ++r) {
    if (splits[r] == 0 || global == 1) {
      splits[r] = 1;
      continue;
    }
    // Shorter requests get fewer splits so that each split keeps at least kMinKeysPerSplit keys.
    const int s = std::clamp(splits[r] / min_blocks, 1, global);
    splits[r] = s;
    schedule.max_splits_used = std::max(schedule.max_splits_used, s);
  }
  return schedule;
}

SplitWorkspaceLayout split_workspace_layout(int max_num_tokens, int num_heads, int head_size) {
  SplitWorkspaceLayout layout;
  const int64_t bytes_per_token_split = int64_t{num_heads} * (head_size + 1) * 4;
  if (bytes_per_token_split <= 0 || max_num_tokens <= 0) return layout;
  const int64_t wanted = int64_t{kMaxSplits} * max_num_tokens;
  const int64_t affordable = kMaxWorkspaceBytes / bytes_per_token_split;
  // At least one decode token with every split, so small budgets still split a single decode.
  layout.token_splits = std::max<int64_t>(kMaxSplits, std::min(wanted, affordable));
  layout.out_floats = layout.token_splits * num_heads * head_size;
  layout.lse_floats = layout.token_splits * num_heads;
  return layout;
}

int graph_safe_max_splits(int64_t num_tokens, int64_t token_splits, int num_heads, int num_kv_heads,
                          int head_size, int num_sms) {
  if (num_tokens <= 0 || num_kv_heads <= 0) return 1;
  // Any batch of num_tokens tokens occupies at least this many CTAs unsplit: every request gets
  // at least ceil(rows / prefill tile rows) row tiles, and a sum of ceilings is at least the
  // ceiling of the sum. From kEnoughWaveFraction of a wave on, choose_num_splits returns 1.
  namespace geometry = kernels::attention::v2;
  const int64_t min_ctas =
      num_kv_heads * geometry::column_chunks(head_size) *
      ceil_div(num_tokens * (num_heads / num_kv_heads), geometry::prefill_tile(head_size).rows());
  if (min_ctas >= kEnoughWaveFraction * num_sms) return 1;
  return static_cast<int>(std::clamp<int64_t>(token_splits / num_tokens, 1, kMaxSplits));
}

}  // namespace pagedattn::plan
