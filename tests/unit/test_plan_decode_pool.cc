// The decode planner's pools and uncut plans: the guided pool's share and shrinking pieces, and
// the uncut plans (pool or static lists) when the segments fit the CTAs whole.
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <vector>

#include "plan_decode_checks.h"

namespace pagedattn::plan {
namespace {

using namespace testing_support;

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

}  // namespace
}  // namespace pagedattn::plan
