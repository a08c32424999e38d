// Helpers of the decode planner's unit tests: batches, planning into 16-byte aligned buffers, and
// the plan's consistency checks (every key of every segment read once, CTA lists and merges
// consistent with the units, the pool's bounds, capacities respected).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>
#include <vector>

#include "plan/decode_plan.h"

namespace pagedattn::plan::testing_support {

using kernels::DecodeMergeItem;
using kernels::DecodePlanHeader;
using kernels::DecodeWorkUnit;

// Plan buffers are 16-byte aligned, as the pinned mirror and the device workspace are.
struct alignas(16) Chunk16 {
  char bytes[16];
};

struct Batch {
  std::vector<int32_t> qsl{0};
  std::vector<int32_t> seq;
  void add(int q_len, int seq_len) {
    qsl.push_back(qsl.back() + q_len);
    seq.push_back(seq_len);
  }
};

struct Planned {
  DecodePlanStats stats;
  std::vector<Chunk16> buffer;
  const DecodePlanHeader& header() const {
    return *reinterpret_cast<const DecodePlanHeader*>(buffer.data());
  }
  const int32_t* cta_begin() const {
    return reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(buffer.data()) +
                                            kernels::kDecodePlanCtaBeginOffset);
  }
  const DecodeWorkUnit* units() const {
    return reinterpret_cast<const DecodeWorkUnit*>(reinterpret_cast<const char*>(buffer.data()) +
                                                   header().units_offset);
  }
  const DecodeMergeItem* merges() const {
    return reinterpret_cast<const DecodeMergeItem*>(reinterpret_cast<const char*>(buffer.data()) +
                                                    header().merges_offset);
  }
  const int32_t* at(int64_t offset) const {
    return reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(buffer.data()) + offset);
  }
};

inline Planned plan(const Batch& b, const DecodePlanConfig& config, int max_model_len = 1 << 20) {
  const DecodePlanLimits limits = decode_plan_limits(config, static_cast<int>(b.seq.size()),
                                                     b.qsl.back(), max_model_len);
  Planned p;
  p.buffer.resize(static_cast<size_t>(limits.plan_bytes + 15) / 16);
  DecodePlanScratch scratch;
  auto stats = plan_decode(b.qsl, b.seq, config, limits, scratch, p.buffer.data());
  EXPECT_TRUE(stats.ok()) << stats.status().to_string();
  if (stats.ok()) p.stats = *stats;
  EXPECT_LE(p.stats.bytes_used, limits.plan_bytes);
  return p;
}

// Checks coverage and consistency; returns the max over CTAs of keys + overheads.
inline int64_t check_plan(const Batch& b, const DecodePlanConfig& config, const Planned& p) {
  const int group = config.num_heads / config.num_kv_heads;
  const DecodePlanHeader& h = p.header();
  EXPECT_EQ(h.num_units, p.stats.num_units);
  EXPECT_EQ(p.cta_begin()[0], 0);
  // The static lists, then the pool.
  EXPECT_EQ(p.cta_begin()[config.num_ctas], h.num_units - p.stats.pool_units);
  // Only uncut plans have a pool (no cuts, so no merges), and never in deterministic mode.
  if (config.cut_penalty_tokens == 0 || config.fixed_chunk_tokens > 0 || p.stats.num_merges > 0) {
    EXPECT_EQ(p.stats.pool_units, 0);
  }
  const int32_t* counters = p.at(kernels::decode_pool_counters_offset(h));
  EXPECT_EQ(counters[0], 0);
  EXPECT_EQ(counters[1], 0);
  int32_t pool_min = p.stats.pool_units > 0 ? INT32_MAX : 0;
  for (int u = h.num_units - p.stats.pool_units; u < h.num_units; ++u) {
    pool_min = std::min(pool_min, p.units()[u].kv_end - p.units()[u].kv_begin);
  }
  EXPECT_EQ(counters[2], pool_min);  // the kernel's lower bound of a pool unit's keys
  int64_t makespan = 0;
  for (int c = 0; c < config.num_ctas; ++c) {
    EXPECT_LE(p.cta_begin()[c], p.cta_begin()[c + 1]);
    int64_t cost = 0;
    for (int u = p.cta_begin()[c]; u < p.cta_begin()[c + 1]; ++u) {
      cost += p.units()[u].kv_end - p.units()[u].kv_begin + config.unit_overhead_tokens;
    }
    makespan = std::max(makespan, cost);
  }
  // Per segment: pieces in key order, contiguous, covering the visible range.
  std::map<std::tuple<int, int>, std::vector<const DecodeWorkUnit*>> segments;
  for (int u = 0; u < h.num_units; ++u) {
    const DecodeWorkUnit& w = p.units()[u];
    segments[{w.req, w.head_row}].push_back(&w);
  }
  int expected_segments = 0;
  for (size_t r = 0; r < b.seq.size(); ++r) {
    const int q_len = b.qsl[r + 1] - b.qsl[r];
    expected_segments += config.num_kv_heads * ((q_len * group + 15) / 16);
  }
  EXPECT_EQ(static_cast<int>(segments.size()), expected_segments);
  int merges = 0;
  for (const auto& [key, pieces] : segments) {
    const DecodeWorkUnit& w0 = *pieces.front();
    const int row0 = w0.head_row & 0xFFFF, rows = std::min(16, w0.q_len * group - row0);
    const int first_pos = w0.kv_len - w0.q_len + row0 / group;
    const int lo = config.window_left >= 0 ? std::max(0, first_pos - config.window_left) : 0;
    EXPECT_EQ(w0.kv_begin, lo);
    EXPECT_EQ(pieces.back()->kv_end, w0.kv_len - w0.q_len + (row0 + rows - 1) / group + 1);
    for (size_t k = 0; k < pieces.size(); ++k) {
      EXPECT_LT(pieces[k]->kv_begin, pieces[k]->kv_end);
      if (k > 0) {
        EXPECT_EQ(pieces[k]->kv_begin, pieces[k - 1]->kv_end);
      }
      if (pieces.size() == 1) {
        EXPECT_EQ(pieces[k]->partial, -1);
        EXPECT_EQ(p.at(kernels::decode_unit_merge_offset(h))[pieces[k] - p.units()], -1);
      } else {
        EXPECT_EQ(pieces[k]->partial, pieces[0]->partial + static_cast<int>(k) * rows);
        if (config.fixed_chunk_tokens == 0) {
          EXPECT_GE(pieces[k]->kv_end - pieces[k]->kv_begin, kMinChunkTokens);
        } else if (k > 0) {
          EXPECT_EQ(pieces[k]->kv_begin % config.fixed_chunk_tokens, 0);
        } else {
          EXPECT_GE(pieces[k]->kv_end, pieces[k]->kv_begin);
        }
      }
    }
    if (pieces.size() > 1) {
      ++merges;
      bool found = false;
      for (int m = 0; m < h.num_merges; ++m) {
        const DecodeMergeItem& item = p.merges()[m];
        if (item.first_row == pieces[0]->partial) {
          found = true;
          // Each piece knows its merge item (the kernel's CTAs count pieces there), from 0.
          for (const DecodeWorkUnit* piece : pieces) {
            EXPECT_EQ(p.at(kernels::decode_unit_merge_offset(h))[piece - p.units()], m);
          }
          EXPECT_EQ(p.at(kernels::decode_merge_done_offset(h))[m], 0);
          EXPECT_EQ(item.num_pieces, static_cast<int>(pieces.size()));
          EXPECT_EQ(item.rows, rows);
          EXPECT_EQ(item.head_row, w0.head_row);
          EXPECT_EQ(item.q_start, w0.q_start);
        }
      }
      EXPECT_TRUE(found);
    }
  }
  EXPECT_EQ(merges, h.num_merges);
  EXPECT_EQ(p.stats.bytes_used, kernels::decode_plan_end(h));
  EXPECT_EQ(makespan, p.stats.max_cta_cost);
  return makespan;
}

// The H200's decode grid and a model's heads, planned as the backend plans (the defaults).
inline DecodePlanConfig production_config() {
  DecodePlanConfig c;
  c.num_ctas = 264;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  return c;
}

// The balanced plan with cuts alone (no uncut plans, no pool): the cost model's balance on any
// batch.
inline DecodePlanConfig h200_config() {
  DecodePlanConfig c = production_config();
  c.cut_penalty_tokens = 0;
  return c;
}

}  // namespace pagedattn::plan::testing_support
