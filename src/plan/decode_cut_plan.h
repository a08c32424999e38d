// The balanced decode plan with cuts (internal to decode_plan.cc; decode_plan.h describes the
// model): segments longest first streamed into the CTAs' static lists, each CTA's budget the cost
// not yet assigned over the CTAs left, a segment that overflows a CTA cut (pieces of at least
// kMinChunkTokens keys); in deterministic mode cuts only at multiples of fixed_chunk_tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "plan/decode_plan.h"

namespace pagedattn::plan::detail {

// What the balanced plan wrote.
struct CutPlan {
  int num_units = 0;
  int64_t max_cost = 0;
  int64_t partial_rows = 0;
};

// Writes the units (cut segments' pieces consecutive, with their partial rows) and cta_begin
// [num_ctas + 1]; the merges of cut segments into scratch.merges / merge_units. `order`: the
// requests longest first (plan_decode's sort keys); `total`: the batch's cost.
Status plan_with_cuts(const std::vector<int64_t>& order, std::span<const int32_t> query_start_loc,
                      std::span<const int32_t> seq_lens, const DecodePlanConfig& config,
                      int64_t total, const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                      int32_t* cta_begin, kernels::DecodeWorkUnit* units, CutPlan& out);

// The error of a plan that does not fit the workspace.
Status capacity_error(const std::string& what, int64_t need, int64_t have);

}  // namespace pagedattn::plan::detail
