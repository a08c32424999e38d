// The decode planner's uncut plans (a pool of whole segments, or static lists) when the segments
// fit the CTAs whole.
#include <gtest/gtest.h>

#include <climits>
#include <vector>

#include "plan_decode_checks.h"

namespace pagedattn::plan {
namespace {

using namespace testing_support;

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
  DecodePlanConfig config = production_config();
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
