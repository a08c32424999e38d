// The decode planner: every key of every (request, KV head, row tile) read exactly once, CTA lists
// and merges consistent with the units, capacities respected, deterministic cuts at fixed
// multiples, and the plan with cuts no worse in makespan than FlashInfer's binary-searched chunk
// size; the backend's configuration (uncut plans where they fit) on the same batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <queue>
#include <random>
#include <vector>

#include "plan_decode_checks.h"

namespace pagedattn::plan {
namespace {

using namespace testing_support;

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
    const DecodePlanConfig production = production_config();
    check_plan(batches[i], production, plan(batches[i], production));
  }
}

TEST(PlanDecode, SpeculativeRowsWindowsAndLengthOne) {
  Batch b;
  for (int i = 0; i < 40; ++i) b.add(1 + i % 8, 8 + 97 * i);
  b.add(1, 1);
  b.add(0, 5);  // a padded request of a uniform batch: no rows, no units
  for (int window : {-1, 0, 63, 1000}) {
    for (int heads : {8, 32, 128}) {
      for (int penalty : {kCutPenaltyTokens, 0}) {  // the backend's plans; cuts always
        DecodePlanConfig config = h200_config();
        config.num_heads = heads;
        config.window_left = window;
        config.cut_penalty_tokens = penalty;
        check_plan(b, config, plan(b, config));
      }
    }
  }
}

TEST(PlanDecode, DeterministicCutsAtFixedMultiples) {
  Batch b;
  for (int i = 0; i < 20; ++i) b.add(i % 3 + 1, 100 + 777 * i);
  for (int ctas : {1, 5, 264}) {
    DecodePlanConfig config = production_config();
    config.num_ctas = ctas;
    config.fixed_chunk_tokens = kDeterministicChunkTokens;
    check_plan(b, config, plan(b, config, 20000));
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

// A listed subset of a step (FLASH_ATTN's decodes among its prefills, in any order) plans as the
// same requests side by side do, each unit naming its request's index and token range in the step.
TEST(PlanDecode, ListedRequestsPlanAsTheirOwnBatch) {
  Batch step, alone;
  std::vector<int32_t> listed;
  std::mt19937 rng(11);
  for (int r = 0; r < 60; ++r) {
    const bool decode = rng() % 3 != 0;
    const int q_len = decode ? 1 + static_cast<int>(rng() % 4) : 20 + static_cast<int>(rng() % 90);
    const int seq_len = q_len + static_cast<int>(rng() % 5000);
    step.add(q_len, seq_len);
    if (!decode) continue;
    listed.push_back(r);
    alone.add(q_len, seq_len);
  }
  for (const DecodePlanConfig& config : {h200_config(), production_config()}) {
    const DecodePlanLimits limits = decode_plan_limits(
        config, static_cast<int>(step.seq.size()), step.qsl.back(), 1 << 20);
    Planned p;
    p.buffer.resize(static_cast<size_t>(limits.plan_bytes + 15) / 16);
    DecodePlanScratch scratch;
    auto stats = plan_decode(step.qsl, step.seq, listed, config, limits, scratch, p.buffer.data());
    ASSERT_TRUE(stats.ok()) << stats.status().to_string();
    p.stats = *stats;
    const Planned expected = plan(alone, config);
    check_plan(alone, config, expected);
    ASSERT_EQ(p.header().num_units, expected.header().num_units);
    for (int u = 0; u < p.header().num_units; ++u) {
      const DecodeWorkUnit& got = p.units()[u];
      const DecodeWorkUnit& want = expected.units()[u];
      const int r = listed[want.req];
      EXPECT_EQ(got.req, r) << "unit " << u;
      EXPECT_EQ(got.q_start, step.qsl[r]) << "unit " << u;
      EXPECT_EQ(got.q_len, want.q_len);
      EXPECT_EQ(got.kv_len, want.kv_len);
      EXPECT_EQ(got.head_row, want.head_row);
      EXPECT_EQ(got.kv_begin, want.kv_begin);
      EXPECT_EQ(got.kv_end, want.kv_end);
    }
  }
  // An index outside the step is refused by name.
  const DecodePlanConfig config = h200_config();
  const DecodePlanLimits limits = decode_plan_limits(config, 4, 4, 4096);
  std::vector<Chunk16> buffer(static_cast<size_t>(limits.plan_bytes + 15) / 16);
  DecodePlanScratch scratch;
  const std::vector<int32_t> qsl{0, 1, 2}, seq{5, 9}, outside{1, 2};
  auto bad = plan_decode(qsl, seq, outside, config, limits, scratch, buffer.data());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request index 2"), std::string::npos)
      << bad.status().to_string();
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
