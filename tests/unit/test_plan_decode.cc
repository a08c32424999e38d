// The decode planner: every key of every (request, KV head, row tile) read exactly once, CTA lists
// and merges consistent with the units, capacities respected, deterministic cuts at fixed
// multiples, and a makespan no worse than FlashInfer's binary-searched chunk size.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

#include "plan/decode_plan.h"

namespace pagedattn::plan {
namespace {

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

Planned plan(const Batch& b, const DecodePlanConfig& config, int max_model_len = 1 << 20) {
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
int64_t check_plan(const Batch& b, const DecodePlanConfig& config, const Planned& p) {
  const int group = config.num_heads / config.num_kv_heads;
  const DecodePlanHeader& h = p.header();
  EXPECT_EQ(h.num_units, p.stats.num_units);
  EXPECT_EQ(p.cta_begin()[0], 0);
  // The static lists, then the pool.
  EXPECT_EQ(p.cta_begin()[config.num_ctas], h.num_units - p.stats.pool_units);
  const bool no_pool = config.cut_penalty_tokens == 0 || config.whole_pool_ratio == 0;
  if (config.pool_permille == 0 && no_pool) {
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

// FlashInfer's FA2 plan (PrefillSplitQOKVIndptr): the smallest chunk (>= 128 keys) whose unit
// count fits 2 x SMs, then units in batch order on the first free of num_ctas slots.
int64_t flashinfer_makespan(const Batch& b, const DecodePlanConfig& config, int num_sms) {
  const int group = config.num_heads / config.num_kv_heads;
  std::vector<std::pair<int64_t, int64_t>> segs;  // (keys, row tiles x heads)
  int64_t max_len = 1;
  for (size_t r = 0; r < b.seq.size(); ++r) {
    const int q_len = b.qsl[r + 1] - b.qsl[r];
    if (q_len == 0) continue;
    int64_t keys = b.seq[r];
    if (config.window_left >= 0) keys = std::min<int64_t>(keys, config.window_left + q_len);
    segs.push_back({keys, int64_t{config.num_kv_heads} * ((q_len * group + 15) / 16)});
    max_len = std::max(max_len, keys);
  }
  auto count = [&](int64_t chunk) {
    int64_t n = 0;
    for (auto [keys, tiles] : segs) n += tiles * ((keys + chunk - 1) / chunk);
    return n;
  };
  int64_t lo = kMinChunkTokens, hi = std::max<int64_t>(max_len, kMinChunkTokens);
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (count(mid) <= 2 * num_sms) hi = mid; else lo = mid + 1;
  }
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> slots;
  for (int c = 0; c < config.num_ctas; ++c) slots.push(0);
  int64_t makespan = 0;
  for (auto [keys, tiles] : segs) {
    for (int64_t t = 0; t < tiles; ++t) {
      for (int64_t k0 = 0; k0 < keys; k0 += lo) {
        const int64_t end = slots.top() + std::min(lo, keys - k0) + config.unit_overhead_tokens;
        slots.pop();
        slots.push(end);
        makespan = std::max(makespan, end);
      }
    }
  }
  return makespan;
}

// The static plan alone (no pool): the cost model's balance.
DecodePlanConfig h200_config() {
  DecodePlanConfig c;
  c.pool_permille = 0;
  c.cut_penalty_tokens = 0;
  c.num_ctas = 264;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  return c;
}

TEST(PlanDecode, CoversEveryKeyOnceAndBeatsFlashInfer) {
  std::mt19937 rng(7);
  std::vector<Batch> batches(7);
  for (int i = 0; i < 64; ++i) batches[0].add(1, 4096);
  for (int i = 0; i < 256; ++i) batches[1].add(1, 1 + static_cast<int>(rng() % 8192));
  for (int i = 0; i < 16; ++i) batches[2].add(1, 512);
  batches[3].add(1, 100000);
  for (int i = 0; i < 33; ++i) batches[4].add(1, i % 4 == 0 ? 30000 : 200 + i);
  for (int i = 0; i < 1024; ++i) batches[5].add(1, 1000 + static_cast<int>(rng() % 64));
  for (int i = 0; i < 265; ++i) batches[6].add(1, 4096);
  for (size_t i = 0; i < batches.size(); ++i) {
    const DecodePlanConfig config = h200_config();
    const Planned p = plan(batches[i], config);
    const int64_t ours = check_plan(batches[i], config, p);
    const int64_t theirs = flashinfer_makespan(batches[i], config, 132);
    EXPECT_LE(ours, theirs) << "batch " << i;
  }
}

// The pool: the static lists hold about (1 - share) of the cost each, the pool the rest in pieces
// that shrink towards the end (never below the minimum piece, unless a whole segment is shorter),
// every key still read once; the workspace's capacities hold for the pool's extra pieces.
TEST(PlanDecode, PoolTakesTheShareInShrinkingPieces) {
  std::mt19937 rng(11);
  std::vector<Batch> batches(5);
  for (int i = 0; i < 64; ++i) batches[0].add(1, 4096);
  for (int i = 0; i < 256; ++i) batches[1].add(1, 1 + static_cast<int>(rng() % 8192));
  for (int i = 0; i < 4; ++i) batches[2].add(1, 32768);
  for (int i = 0; i < 128; ++i) batches[3].add(2, 1024);
  for (int i = 0; i < 3; ++i) batches[4].add(1, 300);
  for (size_t i = 0; i < batches.size(); ++i) {
    for (int permille : {100, 150, 400, 1000}) {
      DecodePlanConfig config = h200_config();
      config.pool_permille = permille;
      const Planned p = plan(batches[i], config, 32768);
      const int64_t static_makespan = check_plan(batches[i], config, p);
      int64_t total = 0, pool_keys = 0;
      const DecodePlanHeader& h = p.header();
      const int pool_begin = p.cta_begin()[config.num_ctas];
      int64_t last_len = INT64_MAX;
      for (int u = 0; u < h.num_units; ++u) {
        const DecodeWorkUnit& w = p.units()[u];
        const int64_t len = w.kv_end - w.kv_begin;
        total += len;
        if (u < pool_begin) continue;
        pool_keys += len;
        // A cut pool piece's keys end at a multiple of 64 (its next piece starts there).
        if (u + 1 < h.num_units && p.units()[u + 1].head_row == w.head_row &&
            p.units()[u + 1].req == w.req) {
          EXPECT_EQ(w.kv_end % 64, 0) << "batch " << i << " unit " << u;
          EXPECT_GE(len, kMinPoolPieceTokens);
          if (last_len != INT64_MAX) {
            EXPECT_LE(len, std::max<int64_t>(last_len, kMinPoolPieceTokens) + 64)
                << "batch " << i << " unit " << u;
          }
          last_len = len;
        }
      }
      EXPECT_GT(total, 0);
      if (permille == 1000) {
        EXPECT_EQ(pool_begin, 0) << "batch " << i;
      }
      // The static lists: each at most its share of the cost (plus a unit's rounding).
      const int64_t cost = total + int64_t{config.unit_overhead_tokens} * h.num_units;
      const int64_t share = cost * (1000 - permille) / 1000 / config.num_ctas;
      EXPECT_LE(static_makespan, share + 2 * kUnitOverheadTokens + kMinChunkTokens)
          << "batch " << i << " permille " << permille;
      if (i == 0) {
        EXPECT_GT(p.stats.pool_units, config.num_ctas) << permille;
        EXPECT_GT(pool_keys, total * permille / 1000 / 2) << permille;
      }
    }
  }
}

// Batches whose segments fit the CTAs nearly evenly whole (the round-by-round deal within
// kCutPenaltyTokens of an equal share) are not cut: with at least kWholePoolRatio segments per
// CTA every segment goes into the pool, longest first; with fewer, into static lists in snake
// order. Batches that need cuts keep the balanced plan.
TEST(PlanDecode, UncutPlansWhenSegmentsFitWhole) {
  std::vector<Batch> pooled(3), listed(2), planned(2);
  for (int i = 0; i < 128; ++i) pooled[0].add(1, 1024);             // 64/8 heads: 3.9 per CTA
  for (int i = 0; i < 256; ++i) pooled[1].add(1, 1000 + i % 100);   // 7.8 per CTA
  for (int i = 0; i < 396; ++i) pooled[2].add(2, 500 + i % 5);      // speculative, 12 per CTA
  for (int i = 0; i < 64; ++i) listed[0].add(1, 4096);              // 1.9 per CTA
  for (int i = 0; i < 33; ++i) listed[1].add(1, 8000 - 3 * i);      // 1 per CTA
  for (int i = 0; i < 8; ++i) planned[0].add(1, 32768);             // needs cuts
  for (int i = 0; i < 32; ++i) planned[1].add(1, 8192);             // 32/32 heads: 3.9 per CTA
  DecodePlanConfig config = h200_config();
  config.cut_penalty_tokens = kCutPenaltyTokens;
  for (size_t i = 0; i < pooled.size(); ++i) {
    config.num_heads = i == 0 ? 64 : 32;
    const Planned p = plan(pooled[i], config);
    check_plan(pooled[i], config, p);
    EXPECT_EQ(p.stats.pool_units, p.stats.num_units) << i;
    EXPECT_EQ(p.stats.num_merges, 0) << i;
    int64_t last = INT64_MAX;
    for (int u = 0; u < p.stats.num_units; ++u) {
      const int64_t len = p.units()[u].kv_end - p.units()[u].kv_begin;
      EXPECT_LE(len, last) << "longest first: batch " << i << " unit " << u;
      last = len;
    }
  }
  config.num_heads = 32;
  for (size_t i = 0; i < listed.size(); ++i) {
    const Planned p = plan(listed[i], config);
    const int64_t makespan = check_plan(listed[i], config, p);
    EXPECT_EQ(p.stats.pool_units, 0) << i;
    EXPECT_EQ(p.stats.num_merges, 0) << i;
    EXPECT_EQ(p.stats.num_units, static_cast<int>(listed[i].seq.size()) * 8) << i;
    if (i == 0) {
      EXPECT_EQ(makespan, 2 * (4096 + kUnitOverheadTokens));
    }
  }
  for (size_t i = 0; i < planned.size(); ++i) {
    config.num_kv_heads = i == 1 ? 32 : 8;
    const Planned p = plan(planned[i], config);
    check_plan(planned[i], config, p);
    EXPECT_EQ(p.stats.pool_units, 0) << i;
    EXPECT_GT(p.stats.num_merges, 0) << i;
  }
  // Deterministic mode keeps its fixed chunks.
  config.num_kv_heads = 8;
  config.num_heads = 64;
  config.fixed_chunk_tokens = 512;
  const Planned d = plan(pooled[0], config);
  check_plan(pooled[0], config, d);
  EXPECT_GT(d.stats.num_merges, 0);
}

TEST(PlanDecode, SpeculativeRowsWindowsAndLengthOne) {
  Batch b;
  for (int i = 0; i < 40; ++i) b.add(1 + i % 8, 8 + 97 * i);
  b.add(1, 1);
  b.add(0, 5);  // a padded request of a uniform batch: no rows, no units
  for (int window : {-1, 0, 63, 1000}) {
    for (int heads : {8, 32, 128}) {
      for (int permille : {0, 150, 1000}) {
        DecodePlanConfig config = h200_config();
        config.num_heads = heads;
        config.window_left = window;
        config.pool_permille = permille;
        config.cut_penalty_tokens = permille == 0 ? kCutPenaltyTokens : 0;
        check_plan(b, config, plan(b, config));
      }
    }
  }
}

TEST(PlanDecode, DeterministicCutsAtFixedMultiples) {
  Batch b;
  for (int i = 0; i < 20; ++i) b.add(i % 3 + 1, 100 + 777 * i);
  for (int ctas : {1, 5, 264}) {
    for (int permille : {0, 150}) {
      DecodePlanConfig config = h200_config();
      config.num_ctas = ctas;
      config.pool_permille = permille;
      config.fixed_chunk_tokens = kDeterministicChunkTokens;
      check_plan(b, config, plan(b, config, 20000));
    }
  }
}

TEST(PlanDecode, OneCtaTakesEverythingUncut) {
  Batch b;
  for (int i = 0; i < 10; ++i) b.add(1, 5000);
  DecodePlanConfig config = h200_config();
  config.num_ctas = 1;
  const Planned p = plan(b, config);
  check_plan(b, config, p);
  EXPECT_EQ(p.stats.num_merges, 0);
  EXPECT_EQ(p.stats.num_units, 10 * 8);
}

TEST(PlanDecode, ErrorsNameTheField) {
  DecodePlanConfig config = h200_config();
  const DecodePlanLimits limits = decode_plan_limits(config, 4, 4, 4096);
  std::vector<Chunk16> buffer(static_cast<size_t>(limits.plan_bytes + 15) / 16);
  DecodePlanScratch scratch;
  const std::vector<int32_t> qsl{0, 1, 2}, seq{5};
  auto bad = plan_decode(qsl, seq, config, limits, scratch, buffer.data());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("query_start_loc"), std::string::npos);
  const std::vector<int32_t> qsl9{0, 9}, seq9{20};
  auto long_q = plan_decode(qsl9, seq9, config, limits, scratch, buffer.data());
  ASSERT_FALSE(long_q.ok());
  EXPECT_NE(long_q.status().message().find("query_len 9"), std::string::npos);
  std::vector<int32_t> qsl_many{0}, seq_many;
  for (int i = 0; i < 100; ++i) {
    qsl_many.push_back(i + 1);
    seq_many.push_back(10);
  }
  auto over = plan_decode(qsl_many, seq_many, config, limits, scratch, buffer.data());
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("capacity"), std::string::npos);
}

}  // namespace
}  // namespace pagedattn::plan
