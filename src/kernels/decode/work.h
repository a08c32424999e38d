// The decode plan as the decode kernels read it: plain structs that the host planner
// (plan/decode_plan.h) writes into a pinned mirror of the workspace and copies to the device once
// per step. Host-only header (no CUDA types); the layouts are part of the kernel's contract.
#pragma once

#include <cstdint>

namespace pagedattn::kernels {

// Packed query rows (token, query head of one KV group) one work unit serves: one m16 MMA tile.
inline constexpr int kDecodeRowsPerTile = 16;

// One work unit: rows [row0, row0 + 16) of a request's packed rows for one KV head, over the keys
// [kv_begin, kv_end). 32 bytes, read with two 16-byte loads.
struct alignas(16) DecodeWorkUnit {
  int32_t req;       // row of the block table
  int32_t q_start;   // first query token of the request
  int32_t q_len;     // query tokens of the request (its packed rows: q_len * group)
  int32_t kv_len;    // keys of the request (context + new tokens)
  int32_t head_row;  // kv_head << 16 | row0
  int32_t kv_begin;  // first key of this unit
  int32_t kv_end;    // one past its last key
  int32_t partial;   // first row of its f32 partial in the workspace; -1: writes the output
};

// A (request, KV head, row tile) whose keys were split over num_pieces units: their partials are
// rows [first_row + k * rows, first_row + (k + 1) * rows) for piece k, merged in piece order.
struct alignas(16) DecodeMergeItem {
  int32_t q_start;
  int32_t q_len;
  int32_t head_row;  // kv_head << 16 | row0
  int32_t first_row;
  int32_t num_pieces;
  int32_t rows;  // packed rows of the tile (<= kDecodeRowsPerTile)
  int32_t unused[2];
};

// Start of the plan. units_offset and merges_offset are byte offsets from the plan's start, so
// that the host packs the used parts back to back and copies one prefix.
struct alignas(16) DecodePlanHeader {
  int32_t num_units;
  int32_t num_merges;
  int32_t units_offset;
  int32_t merges_offset;
};

// Plan layout: header, then cta_begin [num_ctas + 1] int32 (the static units of CTA c are
// [cta_begin[c], cta_begin[c + 1]) in the unit array; units [cta_begin[num_ctas], num_units) are
// the shared pool, which every CTA takes from in order once its static units are done), then
// units, then merges, then unit_merge [num_units] int32 (the merge item of a cut unit's segment,
// -1 for a whole segment), then merge_done [num_merges] int32 (pieces of the segment finished in
// this launch, 0 from the host; the CTA that finishes the last piece merges the segment and resets
// it to 0, so that the next launch of the same plan starts from 0 again), then the pool counters
// (DecodePoolCounters, 0 from the host; the last CTA to finish resets them).
inline constexpr int64_t kDecodePlanCtaBeginOffset = sizeof(DecodePlanHeader);

// next: pool units taken so far in this launch; exited: CTAs finished (both 0 from the host);
// min_keys: the keys of the pool's shortest unit (the host's; the kernel publishes pool units
// ahead of its cursors by this lower bound of their tiles, without loading them).
struct alignas(16) DecodePoolCounters {
  int32_t next;
  int32_t exited;
  int32_t min_keys;
  int32_t unused;
};

inline constexpr int64_t decode_unit_merge_offset(const DecodePlanHeader& h) {
  return h.merges_offset + int64_t{h.num_merges} * static_cast<int64_t>(sizeof(DecodeMergeItem));
}
inline constexpr int64_t decode_merge_done_offset(const DecodePlanHeader& h) {
  return decode_unit_merge_offset(h) + (int64_t{h.num_units} * 4 + 15) / 16 * 16;
}
inline constexpr int64_t decode_pool_counters_offset(const DecodePlanHeader& h) {
  return decode_merge_done_offset(h) + (int64_t{h.num_merges} * 4 + 15) / 16 * 16;
}
// One past the plan's last used byte (the prefix the host copies).
inline constexpr int64_t decode_plan_end(const DecodePlanHeader& h) {
  return decode_pool_counters_offset(h) + static_cast<int64_t>(sizeof(DecodePoolCounters));
}

inline constexpr int32_t decode_head_row(int kv_head, int row0) { return kv_head << 16 | row0; }

}  // namespace pagedattn::kernels
