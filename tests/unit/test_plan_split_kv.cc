// The split-KV heuristic (src/plan/split_kv.h): exact counts for the shapes that matter, and the
// invariants the builder and CUDA graphs rely on.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "plan/split_kv.h"

namespace pagedattn::plan {
namespace {

// H200-like defaults: 132 SMs, 32/8 heads, block 16.
SplitKVConfig h200_config() { return SplitKVConfig{}; }

std::vector<int32_t> starts_from_lens(const std::vector<int32_t>& query_lens) {
  std::vector<int32_t> starts(query_lens.size() + 1, 0);
  std::partial_sum(query_lens.begin(), query_lens.end(), starts.begin() + 1);
  return starts;
}

SplitSchedule plan(const std::vector<int32_t>& query_lens, const std::vector<int32_t>& seq_lens,
                   const SplitKVConfig& config) {
  const std::vector<int32_t> starts = starts_from_lens(query_lens);
  StatusOr<SplitSchedule> schedule = plan_split_kv(starts, seq_lens, config);
  EXPECT_TRUE(schedule.ok()) << schedule.status().to_string();
  return schedule.ok() ? *schedule : SplitSchedule{};
}

// The kernel's tiles (kernels/attention/v2/tile_geometry.h): up to 16 packed rows in one
// decode-shaped tile; prefill-shaped tiles of 128 rows up to head size 128 and 64 above; head
// size 512 in two column chunks. tests/gpu/test_tile_geometry.cu checks these counts against
// the kernel's own scheduler.
TEST(PlanSplitKV, RequestCtasCountsTheKernelsTiles) {
  EXPECT_EQ(request_ctas(1, 32, 8, 128), 8);        // 4 rows: one tile per KV head
  EXPECT_EQ(request_ctas(4, 32, 8, 128), 8);        // 16 rows: still the decode-shaped tile
  EXPECT_EQ(request_ctas(17, 32, 8, 128), 8);       // 68 rows: one 128-row tile
  EXPECT_EQ(request_ctas(33, 32, 8, 128), 16);      // 132 rows: two
  EXPECT_EQ(request_ctas(1000, 32, 8, 128), 256);   // 4000 rows: 32 tiles
  EXPECT_EQ(request_ctas(17, 32, 8, 256), 16);      // 68 rows: two 64-row tiles
  EXPECT_EQ(request_ctas(1000, 32, 8, 256), 504);   // 63 tiles
  EXPECT_EQ(request_ctas(1000, 32, 8, 512), 1008);  // 63 tiles x 2 column chunks
  EXPECT_EQ(request_ctas(1, 32, 8, 512), 16);
  EXPECT_EQ(request_ctas(0, 32, 8, 128), 0);
  EXPECT_EQ(request_ctas(5, 7, 1, 64), 1);  // 35 rows
}

TEST(PlanSplitKV, SingleLongDecodeFillsTheSms) {
  // 8 CTAs unsplit; 14 splits give 112 CTAs (0.85 of one wave of 132), the smallest count within
  // 0.85 of the best (16 splits, 128 CTAs). 4096 keys / 14 = 293 keys per split >= 256.
  const SplitSchedule s = plan({1}, {4096}, h200_config());
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{14}));
  EXPECT_EQ(s.max_splits_used, 14);
  EXPECT_EQ(s.num_ctas_unsplit, 8);
}

TEST(PlanSplitKV, LargeDecodeBatchDoesNotSplit) {
  // 64 requests x 8 KV heads = 512 CTAs: almost four full waves already.
  const SplitSchedule s = plan(std::vector<int32_t>(64, 1), std::vector<int32_t>(64, 4096), h200_config());
  EXPECT_EQ(s.max_splits_used, 1);
  EXPECT_EQ(s.num_splits_per_req, std::vector<int32_t>(64, 1));
}

TEST(PlanSplitKV, SpeculativeVerificationSplits) {
  // 8 requests x 4 queries: 64 CTAs. Two splits make 128 (0.97 of a wave).
  const SplitSchedule s = plan(std::vector<int32_t>(8, 4), std::vector<int32_t>(8, 8192), h200_config());
  EXPECT_EQ(s.num_splits_per_req, std::vector<int32_t>(8, 2));
}

TEST(PlanSplitKV, LongQueriesAreNotSplit) {
  SplitKVConfig config = h200_config();
  const SplitSchedule s = plan({17}, {8192}, config);
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{1}));
  // The cascade prefix pass may split long queries.
  config.split_long_queries = true;
  const SplitSchedule prefix = plan({17}, {8192}, config);
  EXPECT_GT(prefix.num_splits_per_req[0], 1);
}

TEST(PlanSplitKV, ShortContextsAreNotSplit) {
  // 496 keys = 31 blocks < 2 x 16 blocks: a second split would hold fewer than 256 keys.
  const SplitSchedule s = plan({1, 1}, {300, 496}, h200_config());
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{1, 1}));
  // 497 keys = 32 blocks: two splits of 256 keys each.
  EXPECT_EQ(plan({1}, {497}, h200_config()).num_splits_per_req, (std::vector<int32_t>{2}));
}

TEST(PlanSplitKV, ShortContextsAreNotSplitNextToALongOne) {
  // 8 fixed + 8 splittable CTAs: 14 splits make 120 CTAs (0.91 of a wave; two full waves at 32
  // splits are the best, and 14 is the smallest count within 0.85 of it).
  const SplitSchedule s = plan({1, 1}, {300, 8192}, h200_config());
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{1, 14}));
}

TEST(PlanSplitKV, ShorterRequestsGetFewerSplits) {
  // 16 CTAs; the global count is 7 (112 CTAs); the 512-key request keeps 256 keys per split.
  const SplitSchedule s = plan({1, 1}, {32768, 512}, h200_config());
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{7, 2}));
  EXPECT_EQ(s.max_splits_used, 7);
}

TEST(PlanSplitKV, SlidingWindowSplitsOnlyTheKeysItSees) {
  SplitKVConfig config = h200_config();
  EXPECT_EQ(plan({1}, {32768}, config).num_splits_per_req, (std::vector<int32_t>{14}));
  // A 1023-key window: the decode reads 1024 keys = 64 blocks, room for 4 splits of 256 keys.
  config.window_left = 1023;
  EXPECT_EQ(plan({1}, {32768}, config).num_splits_per_req, (std::vector<int32_t>{4}));
  // A 400-key window reads 401 keys: too few to split.
  config.window_left = 400;
  EXPECT_EQ(plan({1}, {32768}, config).num_splits_per_req, (std::vector<int32_t>{1}));
  // Four verification queries see window_left + 4 keys; a short sequence caps them.
  config.window_left = 1020;
  EXPECT_EQ(plan({4, 4}, {32768, 600}, config).num_splits_per_req,
            (std::vector<int32_t>{4, 2}));
}

TEST(PlanSplitKV, PrefillInTheBatchFillsTheSmsAlone) {
  const SplitSchedule s = plan({1, 1000}, {4096, 3000}, h200_config());
  EXPECT_EQ(s.num_splits_per_req, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(s.num_ctas_unsplit, 8 + 256);  // 4000 rows in 32 tiles of 128
}

TEST(PlanSplitKV, PaddingRequestsAndBoundsAreRespected) {
  SplitKVConfig config = h200_config();
  const SplitSchedule padded = plan({1, 0, 0}, {4096, 0, 0}, config);
  EXPECT_EQ(padded.num_splits_per_req, (std::vector<int32_t>{14, 1, 1}));
  config.max_splits = 4;
  EXPECT_EQ(plan({1}, {4096}, config).num_splits_per_req, (std::vector<int32_t>{4}));
  config.max_splits = 1;
  EXPECT_EQ(plan({1}, {4096}, config).num_splits_per_req, (std::vector<int32_t>{1}));
  // Block 256: one block per split at least. Of 1..16 only 1, 2, 3, 4, 6, 8 and 16 shorten the
  // longest split (ceil(16 / s) changes), and 14 or 15 would not: 16 splits, 128 CTAs.
  config = h200_config();
  config.block_size = 256;
  EXPECT_EQ(plan({1}, {4096}, config).num_splits_per_req, (std::vector<int32_t>{16}));
}

TEST(PlanSplitKV, FewerSmsFewerSplits) {
  SplitKVConfig config = h200_config();
  config.num_sms = 16;
  // 8 CTAs; 2 splits fill 16 SMs exactly.
  EXPECT_EQ(plan({1}, {4096}, config).num_splits_per_req, (std::vector<int32_t>{2}));
}

TEST(PlanSplitKV, RejectsInconsistentLengths) {
  const std::vector<int32_t> starts = {0, 5};
  const std::vector<int32_t> seqs = {4};
  StatusOr<SplitSchedule> bad = plan_split_kv(starts, seqs, h200_config());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("query_len 5"), std::string::npos);
  const std::vector<int32_t> two = {4, 4};
  EXPECT_FALSE(plan_split_kv(starts, two, h200_config()).ok());
  SplitKVConfig odd = h200_config();
  odd.num_kv_heads = 5;
  EXPECT_FALSE(plan_split_kv(starts, std::vector<int32_t>{8}, odd).ok());
}

TEST(PlanSplitKV, WorkspaceLayout) {
  // 32 heads x (128 + 1) floats per token-split: 256 MiB hold 16256 of them.
  const SplitWorkspaceLayout big = split_workspace_layout(8192, 32, 128);
  EXPECT_EQ(big.token_splits, 16256);
  EXPECT_EQ(big.out_floats, 16256LL * 32 * 128);
  EXPECT_EQ(big.lse_floats, 16256LL * 32);
  const SplitWorkspaceLayout small = split_workspace_layout(64, 32, 128);
  EXPECT_EQ(small.token_splits, 64 * kMaxSplits);
  EXPECT_EQ(split_workspace_layout(0, 32, 128).token_splits, 0);
}

TEST(PlanSplitKV, GraphSafeBound) {
  const int64_t ts = 16257;
  EXPECT_EQ(graph_safe_max_splits(1, ts, 32, 8, 128, 132), 32);
  EXPECT_EQ(graph_safe_max_splits(64, ts, 32, 8, 128, 132), 32);
  EXPECT_EQ(graph_safe_max_splits(1024, 64 * 1024, 32, 8, 128, 132), 1);
  // Head size 256 (64-row tiles): 208 tokens of GQA 4 need at least 8 x 13 = 104 CTAs (< 105.6);
  // 209 need 112. Head size 128 (128-row tiles): the same at 416 and 417 tokens.
  EXPECT_EQ(graph_safe_max_splits(208, ts, 32, 8, 256, 132), 16257 / 208 > 32 ? 32 : 16257 / 208);
  EXPECT_EQ(graph_safe_max_splits(209, ts, 32, 8, 256, 132), 1);
  EXPECT_EQ(graph_safe_max_splits(416, ts, 32, 8, 128, 132), 16257 / 416 > 32 ? 32 : 16257 / 416);
  EXPECT_EQ(graph_safe_max_splits(417, ts, 32, 8, 128, 132), 1);
  // Head size 512: two column chunks per row tile, so 208 tokens already need 208 CTAs.
  EXPECT_EQ(graph_safe_max_splits(208, ts, 32, 8, 512, 132), 1);
  EXPECT_EQ(graph_safe_max_splits(100, 300, 32, 8, 128, 132), 3);  // workspace-bound
  EXPECT_EQ(graph_safe_max_splits(0, ts, 32, 8, 128, 132), 1);
}

// The bound never takes away a split the heuristic would choose for a batch of that token count.
TEST(PlanSplitKV, GraphSafeBoundCoversEveryBatch) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    const int num_reqs = 1 + static_cast<int>(rng() % 24);
    std::vector<int32_t> q(num_reqs), seq(num_reqs);
    for (int r = 0; r < num_reqs; ++r) {
      const int kind = static_cast<int>(rng() % 3);
      q[r] = kind == 0 ? 1 : kind == 1 ? 1 + static_cast<int>(rng() % 16) : static_cast<int>(rng() % 300);
      seq[r] = q[r] + static_cast<int>(rng() % 40000);
    }
    const int64_t tokens = std::accumulate(q.begin(), q.end(), int64_t{0});
    SplitKVConfig config = h200_config();
    config.num_sms = 16 + static_cast<int>(rng() % 140);
    const int head_sizes[] = {64, 128, 192, 256, 512};
    config.head_size = head_sizes[rng() % 5];
    const SplitSchedule unbounded = plan(q, seq, config);
    const int bound = graph_safe_max_splits(tokens, int64_t{1} << 40, config.num_heads,
                                            config.num_kv_heads, config.head_size, config.num_sms);
    ASSERT_LE(unbounded.max_splits_used, bound) << "trial " << trial << " tokens " << tokens;
    for (int32_t s : unbounded.num_splits_per_req) {
      ASSERT_GE(s, 1);
      ASSERT_LE(s, kMaxSplits);
    }
  }
}

}  // namespace
}  // namespace pagedattn::plan
