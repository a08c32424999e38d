// The one definition of visibility and score transforms (common/mask.h), and the soft
// cap's accuracy for every cap: the definition itself in float against std::tanh in double, and
// CPU_ATTN (its best and its portable SIMD target) against the float64 oracle at caps from 1 to
// 1e30.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/simd_target.h"
#include "common/mask.h"
#include "kernels/attention/paged_attention.h"
#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::mask {
namespace {

KeyRange<int64_t> keys(MaskRule rule, int64_t kv_len, int64_t pos) {
  return visible_keys<int64_t>(rule, kv_len, pos);
}

void expect_range(KeyRange<int64_t> r, int64_t lo, int64_t hi) {
  EXPECT_EQ(r.lo, lo);
  EXPECT_EQ(r.hi, hi);
}

TEST(KernelMask, CausalIsBottomRightAligned) {
  // 10 keys, the last 3 are the new queries (positions 7, 8, 9).
  expect_range(keys({true, -1, -1}, 10, 7), 0, 7);
  expect_range(keys({true, -1, -1}, 10, 9), 0, 9);
  expect_range(keys({false, -1, -1}, 10, 7), 0, 9);
}

TEST(KernelMask, SlidingWindowBoundsBothSides) {
  expect_range(keys({true, 3, 0}, 10, 7), 4, 7);
  expect_range(keys({true, 3, 0}, 10, 2), 0, 2);  // the window starts before key 0
  expect_range(keys({false, 2, 1}, 10, 5), 3, 6);
  expect_range(keys({false, 2, 5}, 10, 8), 6, 9);   // the sequence ends first
  expect_range(keys({false, -1, 2}, 10, 3), 0, 5);  // right side only
  expect_range(keys({false, 4, -1}, 10, 3), 0, 9);  // left side only, reaching key 0
  expect_range(keys({true, 0, 0}, 10, 6), 6, 6);    // the diagonal
  const KeyRange<int64_t> none = keys({true, -1, -1}, 0, 0);
  EXPECT_LT(none.hi, none.lo);  // no keys at all
}

// A rank's share (decode context parallelism): the keys a query sees among one rank's are that
// rank's keys inside what it sees of the whole sequence, counted by local index; checked against
// the keys enumerated one by one over every rank, interleave and mask.
TEST(KernelMask, ShardedKeysAreTheRanksShareOfWhatTheWholeSequenceShows) {
  const MaskRule rules[] = {{false, -1, -1}, {true, -1, -1}, {false, 5, -1}, {true, 9, 0},
                            {false, 0, 3},   {true, 40, -1}, {false, 13, 2}};
  for (int world : {2, 3, 4, 8}) {
    for (int interleave : {1, 2, 16}) {
      for (int rank = 0; rank < world; ++rank) {
        const DcpShard shard{world, rank, interleave};
        for (const MaskRule& plain : rules) {
          ShardedMaskRule rule;
          static_cast<MaskRule&>(rule) = plain;
          rule.key_shard = shard;
          for (int64_t len : {0, 1, 7, 50, 97}) {
            const int64_t local_len = local_keys_below(shard, len);
            for (int64_t pos = 0; pos < len + 3; ++pos) {
              const KeyRange<int64_t> whole = visible_keys<int64_t>(plain, len, pos);
              int64_t lo = local_len, hi = -1, local = 0;
              for (int64_t k = 0; k < len; ++k) {
                if ((k / interleave) % world != rank) continue;
                if (k >= whole.lo && k <= whole.hi) {
                  lo = std::min(lo, local);
                  hi = std::max(hi, local);
                }
                ++local;
              }
              ASSERT_EQ(local, local_len);
              const KeyRange<int64_t> got = visible_keys<int64_t>(rule, local_len, pos);
              const std::string where = "N " + std::to_string(world) + " I " +
                                        std::to_string(interleave) + " rank " +
                                        std::to_string(rank) + " len " + std::to_string(len) +
                                        " pos " + std::to_string(pos);
              if (hi < lo) {
                EXPECT_LT(got.hi, got.lo) << where;  // none
              } else {
                EXPECT_EQ(got.lo, lo) << where;
                EXPECT_EQ(got.hi, hi) << where;
              }
            }
          }
        }
      }
    }
  }
}

TEST(KernelMask, AlibiIsTheSlopeTimesTheDistance) {
  EXPECT_EQ(alibi_bias(0.5f, int64_t{7}, int64_t{3}), 2.0f);
  EXPECT_EQ(alibi_bias(0.5f, int64_t{3}, int64_t{7}), 2.0f);
  EXPECT_EQ(alibi_bias(0.25, int64_t{9}, int64_t{9}), 0.0);
}

// cap * tanh(s / cap) for s = scale * x, in float, against double: within a few float ulps of the
// score for every cap, including those where tanh's argument is far below float's epsilon (a
// ratio of exponentials there returns 0 or a coarsely rounded value).
TEST(KernelMask, SoftCapIsAccurateForEveryCap) {
  const float scale = 0.125f;
  for (double cap = 1.0; cap <= 1e30; cap *= 10.0) {
    const SoftCap<float> folded = make_soft_cap(scale, static_cast<float>(cap), 1.0f);
    for (float x : {-300.0f, -17.5f, -1.0f, -1e-3f, 0.0f, 2e-6f, 0.7f, 9.0f, 123.0f}) {
      const double s = static_cast<double>(scale) * x;
      const double want = cap * std::tanh(s / cap);
      const double got = soft_capped(folded, x);
      EXPECT_NEAR(got, want, 4e-7 * std::fabs(want) + 1e-30) << "cap " << cap << " x " << x;
    }
  }
  // From 2^100 on the kernels skip the cap: it would not change a score below 2^88.
  EXPECT_TRUE(soft_cap_applies(1e30f));
  EXPECT_FALSE(soft_cap_applies(0x1p100f));
  EXPECT_FALSE(soft_cap_applies(3e38f));
  EXPECT_FALSE(soft_cap_applies(0.0f));
  const SoftCap<float> just_below = make_soft_cap(scale, 0x1p99f, 1.0f);
  EXPECT_EQ(soft_capped(just_below, 0x1p80f), scale * 0x1p80f);
  // The base-2 softmax's fold (out_scale = log2 e) multiplies the capped score.
  const SoftCap<float> base2 = make_soft_cap(1.0f, 1e20f, 1.4426950408889634f);
  EXPECT_NEAR(soft_capped(base2, 3.0f), 3.0 * 1.4426950408889634, 1e-6);
}

// v3 is built with 90a among the CUDA architectures, so the generation that never is: 4.
TEST(KernelGenerations, ALaunchOfAGenerationNotBuiltIsRejected) {
  kernels::PagedAttentionParams p;
  p.generation = static_cast<kernels::KernelGeneration>(4);
  p.head_size = 128;
  const Status s = kernels::launch_paged_attention(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("kernel generation v4 is not built"), std::string::npos)
      << s.message();
  EXPECT_FALSE(kernels::paged_attention_generation_built(p.generation));
}

// A key shard (decode context parallelism's windowed context pass) needs the queries' absolute
// positions, and only v2 serves it. Nothing runs: no tokens.
TEST(KernelGenerations, AKeyShardNeedsQueryPositionsAndV2) {
  if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV2)) {
    GTEST_SKIP() << "built without CUDA: no generation validates a launch";
  }
  kernels::PagedAttentionParams p;
  p.generation = kernels::KernelGeneration::kV2;
  p.num_heads = p.num_kv_heads = 1;
  p.head_size = 128;
  p.block_size = 16;
  p.key_shard = DcpShard{2, 1, 16};
  Status s = kernels::launch_paged_attention(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a key_shard needs query_pos0"), std::string::npos) << s.message();
  const int32_t positions[] = {0};
  p.query_pos0 = positions;
  EXPECT_TRUE(kernels::launch_paged_attention(p, nullptr).ok());
  p.key_shard.rank = 2;
  s = kernels::launch_paged_attention(p, nullptr);
  EXPECT_NE(s.message().find("key_shard (world_size 2, rank 2, interleave 16) must have"),
            std::string::npos)
      << s.message();
  p.key_shard.rank = 1;
  p.generation = kernels::KernelGeneration::kV3;
  s = kernels::paged_attention_serves(p);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("v2 serves it"), std::string::npos) << s.message();
}

// CPU_ATTN at caps 1 .. 1e30 and near float's maximum, f32 (the tightest tolerance), with a scale
// that makes the cap bite at small caps; the best and the portable SIMD target.
class CpuSoftCap : public ::testing::TestWithParam<bool> {};

TEST_P(CpuSoftCap, MatchesTheOracleAtEveryCap) {
  ASSERT_TRUE(cpu::force_simd_target(GetParam() ? "generic" : "best").ok());
  for (double cap : {1.0, 1e3, 1e6, 1e7, 1e9, 1e12, 1e15, 1e20, 1e25, 1e30, 3e38}) {
    testing::CaseSpec spec;
    spec.name = "softcap_" + std::to_string(cap);
    spec.seed = 500 + static_cast<uint64_t>(std::log10(cap));
    spec.dtype = DType::kF32;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_size = 72;
    spec.block_size = 16;
    spec.seq_lens = {45, 17, 70};
    spec.query_lens = {1, 17, 6};
    spec.scale = 0.6;
    spec.logits_soft_cap = cap;
    auto batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    auto result = cpu_test::run_against_reference(*batch);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_TRUE(result->comparison.pass) << spec.name << "\n" << result->comparison.detail;
  }
  ASSERT_TRUE(cpu::force_simd_target("best").ok());
}

INSTANTIATE_TEST_SUITE_P(Builds, CpuSoftCap, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "portable" : "dispatched");
                         });

}  // namespace
}  // namespace pagedattn::mask
