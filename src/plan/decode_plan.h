// The decode plan: which CTA of the decode kernel reads which keys of which request. Pure host
// code; the same functions size the plan's workspace (at builder construction) and fill it (once
// per step, into pinned host memory that one asynchronous copy moves to the device).
//
// Model. A decode request (q_len <= 8 query tokens) gives, per KV head, ceil(q_len * G / 16)
// segments: 16 packed query rows (token, query head of the group) over the keys they can see.
// Each segment is read by one or more work units (a chunk of its keys); the kernel runs a fixed
// grid of num_ctas CTAs (every CTA resident at once), each walking its own list of units. The
// cost of a unit is its keys plus a fixed overhead (prologue latency, partial write, merge), in
// key-token units. The planner balances the CTAs: segments longest first, streamed into CTAs
// whose budget is the remaining cost over the remaining CTAs; a segment that overflows a CTA is
// cut (pieces of at least kMinChunkTokens keys): into the CTA's remaining room, or, starting an
// empty CTA, into equal pieces of about one budget each, so the makespan stays close to the
// average. Cuts fall anywhere: the KV tile at a cut is read by both units, each loading and
// counting only its own keys. Cut segments write f32 partials that a combine merges by LSE, in
// piece order. Deterministic mode cuts only at fixed multiples of fixed_chunk_tokens instead, so a
// request's pieces, and therefore its output bits, do not depend on the rest of the batch.
//
// Uncut plans and the pool. A cut piece costs its partial, its count and its share of a merge, so
// when the segments dealt whole, longest first, round by round (decode_whole_plan.h) cost at most
// cut_penalty_tokens (and at most an eighth of the share) more than an equal share, every segment
// is one unit: in the CTAs' static lists, or, with at least kWholePoolRatio segments per CTA, in a
// shared pool that the CTAs take from in order (one atomic each), so the CTAs on SMs that stream
// faster take more (static lists leave those idle at the end). Which CTA runs a pool unit changes
// from launch to launch; its keys do not (deterministic mode keeps its fixed chunks: uncut plans
// never apply to it). Plans with cuts have no pool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/decode/work.h"
#include "pagedattn/status.h"
#include "plan/decode_whole_plan.h"

namespace pagedattn::plan {

// A piece of a cut segment reads at least this many keys (FlashInfer's minimum chunk).
inline constexpr int kMinChunkTokens = 128;
// Fixed cost of a unit in key tokens: the prologue (the first K/V tiles' latency) and epilogue,
// as keys one CTA streams in that time (an estimate; docs/kernels/decode.md).
inline constexpr int kUnitOverheadTokens = 64;
// Uncut plans: taken when the segments dealt whole, round by round, cost at most this much more
// than an equal share (about what a cut piece's partial, count and merge cost a CTA, in keys at
// D 128 bf16), then run as a pool when there are at least kWholePoolRatio segments per CTA (with
// fewer, the dynamic deal of big units can leave some SMs with both CTAs busy at the end: static
// lists then).
inline constexpr int kCutPenaltyTokens = 640;
inline constexpr int kWholePoolRatio = 3;
// Decode query lengths the kernel serves (speculative verification packs q_len * G rows).
inline constexpr int kMaxDecodeQueryLen = 8;
// vLLM's batch-invariant decode split (flashinfer.py: decode_fixed_split_size = 2048).
inline constexpr int kDeterministicChunkTokens = 2048;

struct DecodePlanConfig {
  int num_ctas = 264;  // the decode grid: SMs x resident CTAs per SM
  int num_heads = 32;
  int num_kv_heads = 8;
  int window_left = -1;          // keys before a query it sees (-1: all)
  int fixed_chunk_tokens = 0;    // > 0: deterministic mode, cuts at multiples of this only
  int unit_overhead_tokens = kUnitOverheadTokens;
  int cut_penalty_tokens = kCutPenaltyTokens;  // 0: the balanced plan with cuts always (tests)
};

// Capacities of one builder's plan, fixed at construction.
struct DecodePlanLimits {
  int num_ctas = 0;
  int64_t max_units = 0;
  int64_t max_merges = 0;
  int64_t max_partial_rows = 0;  // f32 partial rows (each head_size floats and one LSE)
  int64_t plan_bytes = 0;        // header + cta_begin + units + merges, 16-byte aligned
};

// max_decode_reqs / max_decode_tokens: the most decode requests and tokens of one step;
// max_model_len bounds a request's keys (deterministic mode's piece count).
DecodePlanLimits decode_plan_limits(const DecodePlanConfig& config, int max_decode_reqs,
                                    int max_decode_tokens, int max_model_len);

// What plan_decode wrote.
struct DecodePlanStats {
  int num_units = 0;
  int num_merges = 0;
  int64_t partial_rows = 0;
  int64_t bytes_used = 0;  // prefix of the plan to copy to the device
  int64_t max_cta_cost = 0;  // the largest static list's cost (keys + overheads)
  int pool_units = 0;        // units in the shared pool
};

// Host scratch reused across steps (no allocation once warm).
struct DecodePlanScratch {
  std::vector<int32_t> requests;  // every request, when none are listed
  std::vector<int64_t> order;  // sort keys: longest visible range first, then batch order
  std::vector<kernels::DecodeMergeItem> merges;
  std::vector<int32_t> merge_units;  // each merge's first unit (its pieces are consecutive units)
  std::vector<detail::WholeRowTile> row_tiles;  // uncut plans: the row tiles, longest first
};

// Plans the listed requests of a step, in any order: query_start_loc [n + 1] and seq_lens [n] of
// the step (host; a unit names its request's index, so the kernel reads that block-table row and
// those query rows). Writes the plan into `plan` (limits.plan_bytes bytes, 16-byte aligned).
// Errors name the field and the value.
StatusOr<DecodePlanStats> plan_decode(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      std::span<const int32_t> requests,
                                      const DecodePlanConfig& config,
                                      const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                                      void* plan);

// Plans every request of query_start_loc and seq_lens.
StatusOr<DecodePlanStats> plan_decode(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      const DecodePlanConfig& config,
                                      const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                                      void* plan);

}  // namespace pagedattn::plan
