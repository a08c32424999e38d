// The prefill part of a step: FLASHINFER's (requests after the decodes) as a query-start array for
// the paged attention kernel and its split-KV schedule; FLASH_ATTN's (any order) as the list of its
// requests and their schedule. Pure host code.
//
// Query starts: every request of the step keeps its slot and its absolute token offsets, the
// decodes with an empty query range (the kernel returns at once for them), so one launch shape
// serves any decode/prefill mix of the same request and token counts (CUDA graphs ALWAYS). KV
// chunks: plan::plan_split_kv over the prefill requests (query tiles x KV chunks, the visible
// keys with causal trimming and the window); none in deterministic mode (batch invariance). The
// paged kernel's split combine walks every token of its launch, the decodes' too: the prefill
// pass therefore runs before the decode kernel, which then writes the decode tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagedattn/status.h"
#include "plan/split_kv.h"

namespace pagedattn::plan {

struct PrefillPlan {
  int num_prefills = 0;
  int max_splits_used = 1;  // 1: no split (num_splits_per_req untouched)
};

// query_start_loc [n + 1], seq_lens [n] of the whole step; the first num_decodes requests are
// decodes. Writes cu_seqlens [n + 1] (decodes empty) and, when split, num_splits [n] (decodes 1).
StatusOr<PrefillPlan> plan_prefill(std::span<const int32_t> query_start_loc,
                                   std::span<const int32_t> seq_lens, int num_decodes,
                                   const SplitKVConfig& config, bool allow_splits,
                                   std::span<int32_t> cu_seqlens, std::span<int32_t> num_splits);

// A step's requests by the kernel family that serves them, in batch order: requests of at most
// max_decode_query_len query tokens (decodes, speculative verification) for the decode kernel, the
// others for the prefill pass, which names its requests (PagedAttentionParams::pass_requests), so
// the batch runs in any order with no reorder.
struct StepRouting {
  std::vector<int32_t> decodes;
  std::vector<int32_t> prefills;
  int decode_max_query_len = 0;  // the decodes' longest query
};
void route_requests(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                    int max_decode_query_len, StepRouting& routing);

// The listed requests' split schedule, planned over their own lengths: num_splits [n] gets their
// counts (1 without splits) and 0 for every other request (the split combine leaves those rows).
// scratch holds the listed requests' lengths side by side afterwards (a batch of their own).
struct ListedPrefillScratch {
  std::vector<int32_t> query_start_loc;
  std::vector<int32_t> seq_lens;
};
StatusOr<PrefillPlan> plan_listed_prefill(std::span<const int32_t> query_start_loc,
                                          std::span<const int32_t> seq_lens,
                                          std::span<const int32_t> requests,
                                          const SplitKVConfig& config, bool allow_splits,
                                          ListedPrefillScratch& scratch,
                                          std::span<int32_t> num_splits);

// Query tiles x KV tiles the prefill requests touch, with causal trimming: tile (i, j) counts
// when some query row of tile i sees some key of tile j. The paged kernel's work, for reports
// and tests of the split decision.
int64_t prefill_tile_work(std::span<const int32_t> query_start_loc,
                          std::span<const int32_t> seq_lens, int num_decodes, int group,
                          int rows_per_tile, int keys_per_tile, int window_left);

}  // namespace pagedattn::plan
