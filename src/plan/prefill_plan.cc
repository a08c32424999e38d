#include "plan/prefill_plan.h"

#include <algorithm>
#include <string>

namespace pagedattn::plan {

StatusOr<PrefillPlan> plan_prefill(std::span<const int32_t> query_start_loc,
                                   std::span<const int32_t> seq_lens, int num_decodes,
                                   const SplitKVConfig& config, bool allow_splits,
                                   std::span<int32_t> cu_seqlens, std::span<int32_t> num_splits) {
  const int n = static_cast<int>(seq_lens.size());
  if (query_start_loc.size() != seq_lens.size() + 1 || num_decodes < 0 || num_decodes > n ||
      cu_seqlens.size() < query_start_loc.size() || num_splits.size() < seq_lens.size()) {
    return invalid_argument("prefill plan: " + std::to_string(query_start_loc.size()) +
                            " query starts, " + std::to_string(n) + " requests, num_decodes " +
                            std::to_string(num_decodes) + ", buffers " +
                            std::to_string(cu_seqlens.size()) + "/" +
                            std::to_string(num_splits.size()));
  }
  for (int r = 0; r <= n; ++r) cu_seqlens[r] = query_start_loc[std::max(r, num_decodes)];
  PrefillPlan plan;
  plan.num_prefills = n - num_decodes;
  if (!allow_splits || plan.num_prefills == 0) return plan;
  PAGEDATTN_ASSIGN_OR_RETURN(
      const SplitSchedule schedule,
      plan_split_kv(query_start_loc.subspan(num_decodes), seq_lens.subspan(num_decodes), config));
  std::fill(num_splits.begin(), num_splits.begin() + num_decodes, 1);
  std::copy(schedule.num_splits_per_req.begin(), schedule.num_splits_per_req.end(),
            num_splits.begin() + num_decodes);
  plan.max_splits_used = schedule.max_splits_used;
  return plan;
}

void route_requests(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                    int max_decode_query_len, StepRouting& routing) {
  routing.decodes.clear();
  routing.prefills.clear();
  routing.decode_max_query_len = 0;
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const int q_len = query_start_loc[r + 1] - query_start_loc[r];
    if (q_len > max_decode_query_len) {
      routing.prefills.push_back(static_cast<int32_t>(r));
      continue;
    }
    routing.decodes.push_back(static_cast<int32_t>(r));
    routing.decode_max_query_len = std::max(routing.decode_max_query_len, q_len);
  }
}

StatusOr<PrefillPlan> plan_listed_prefill(std::span<const int32_t> query_start_loc,
                                          std::span<const int32_t> seq_lens,
                                          std::span<const int32_t> requests,
                                          const SplitKVConfig& config, bool allow_splits,
                                          ListedPrefillScratch& scratch,
                                          std::span<int32_t> num_splits) {
  const size_t n = seq_lens.size();
  if (query_start_loc.size() != n + 1 || num_splits.size() < n) {
    return invalid_argument("prefill plan: " + std::to_string(query_start_loc.size()) +
                            " query starts, " + std::to_string(n) + " requests, split buffer " +
                            std::to_string(num_splits.size()));
  }
  std::fill(num_splits.begin(), num_splits.begin() + n, 0);
  scratch.query_start_loc.assign(1, 0);
  scratch.seq_lens.clear();
  for (const int32_t r : requests) {
    if (r < 0 || static_cast<size_t>(r) >= n) {
      return invalid_argument("prefill plan: request index " + std::to_string(r) +
                              " (allowed: 0 to " + std::to_string(n) + " - 1)");
    }
    scratch.query_start_loc.push_back(scratch.query_start_loc.back() + query_start_loc[r + 1] -
                                      query_start_loc[r]);
    scratch.seq_lens.push_back(seq_lens[r]);
    num_splits[r] = 1;
  }
  PrefillPlan plan;
  plan.num_prefills = static_cast<int>(requests.size());
  if (requests.empty() || !allow_splits) return plan;
  PAGEDATTN_ASSIGN_OR_RETURN(const SplitSchedule schedule,
                             plan_split_kv(scratch.query_start_loc, scratch.seq_lens, config));
  for (size_t i = 0; i < requests.size(); ++i) {
    num_splits[requests[i]] = schedule.num_splits_per_req[i];
  }
  plan.max_splits_used = schedule.max_splits_used;
  return plan;
}

int64_t prefill_tile_work(std::span<const int32_t> query_start_loc,
                          std::span<const int32_t> seq_lens, int num_decodes, int group,
                          int rows_per_tile, int keys_per_tile, int window_left) {
  int64_t work = 0;
  for (size_t r = num_decodes; r < seq_lens.size(); ++r) {
    const int q_len = query_start_loc[r + 1] - query_start_loc[r];
    const int ctx = seq_lens[r] - q_len;
    for (int row0 = 0; row0 < q_len * group; row0 += rows_per_tile) {
      const int last_row = std::min(q_len * group, row0 + rows_per_tile) - 1;
      const int hi = ctx + last_row / group;  // causal: the last row's position
      const int lo = window_left >= 0 ? std::max(0, ctx + row0 / group - window_left) : 0;
      work += hi / keys_per_tile - lo / keys_per_tile + 1;
    }
  }
  return work;
}

}  // namespace pagedattn::plan
