// NaN propagates like the math (docs/attention.md): a NaN in a query or in a key that a row sees
// makes that row's output NaN, one in a value it sees the same element of it, on every SIMD
// target; rows that do not see it stay finite, and keys outside a request's context are never
// read (the runs' caches are NaN there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "backends/cpu/simd_target.h"
#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kHeads = 4, kKvHeads = 2, kDim = 64;

// Request 0 decodes one token over 40 keys; request 1 prefills tokens 1..10 of a 30-token context
// (positions 20..29), causal: its token i sees keys [0, 20 + i].
testing::CaseSpec nan_case() {
  testing::CaseSpec spec;
  spec.name = "nan";
  spec.seed = 77;
  spec.dtype = DType::kF32;
  spec.num_heads = kHeads;
  spec.num_kv_heads = kKvHeads;
  spec.head_size = kDim;
  spec.block_size = 16;
  spec.seq_lens = {40, 30};
  spec.query_lens = {1, 10};
  return spec;
}

float* row(const TensorView& t, int64_t token, int head) {
  return static_cast<float*>(t.data()) + token * t.stride(0) + head * t.stride(1);
}

int nan_count(const RunResult& r, int64_t token, int head) {
  const float* out = row(r.output.view(), token, head);
  int nans = 0;
  for (int d = 0; d < kDim; ++d) nans += std::isnan(out[d]) ? 1 : 0;
  return nans;
}

// Whether every element of output row (token, head) is NaN (true) or every one is finite (false);
// anything else fails.
bool all_nan(const RunResult& r, int64_t token, int head) {
  const int nans = nan_count(r, token, head);
  EXPECT_TRUE(nans == 0 || nans == kDim) << "token " << token << " head " << head;
  return nans == kDim;
}

RunResult run(testing::HostBatch& batch) {
  auto result = run_against_reference(batch);
  EXPECT_TRUE(result.ok()) << result.status().to_string();
  return result.ok() ? std::move(*result) : RunResult{};
}

class CpuNaN : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cpu::force_simd_target(GetParam()).ok());
    auto made = testing::make_host_batch(nan_case(), KVCacheLayout::kNHD);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    batch_ = std::make_unique<testing::HostBatch>(std::move(*made));
  }
  void TearDown() override { ASSERT_TRUE(cpu::force_simd_target("best").ok()); }

  std::unique_ptr<testing::HostBatch> batch_;
};

TEST_P(CpuNaN, InTheQueryReachesOnlyItsRow) {
  row(batch_->query.view(), 0, 1)[7] = kNaN;
  const RunResult r = run(*batch_);
  for (int h = 0; h < kHeads; ++h) EXPECT_EQ(all_nan(r, 0, h), h == 1) << "head " << h;
  for (int t = 1; t <= 10; ++t) EXPECT_FALSE(all_nan(r, t, 1)) << "token " << t;
}

// Request 1's new token 3 (position 23) of KV head 0 is seen by its rows at positions >= 23 of
// heads 0 and 1: a NaN in its key makes their whole rows NaN (every weight), one in its value the
// same element of their rows.
bool sees_new_token_3(int i, int h) {
  return i >= 3 && h < 2;
}

TEST_P(CpuNaN, InAVisibleKeyReachesTheRowsThatSeeIt) {
  row(batch_->key.view(), 1 + 3, 0)[5] = kNaN;
  const RunResult r = run(*batch_);
  for (int i = 0; i < 10; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      EXPECT_EQ(all_nan(r, 1 + i, h), sees_new_token_3(i, h)) << "row " << i << " head " << h;
    }
  }
  for (int h = 0; h < kHeads; ++h) EXPECT_FALSE(all_nan(r, 0, h));
}

TEST_P(CpuNaN, InAVisibleValueReachesTheRowsThatSeeIt) {
  row(batch_->value.view(), 1 + 3, 0)[60] = kNaN;
  const RunResult r = run(*batch_);
  for (int i = 0; i < 10; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      const bool sees = sees_new_token_3(i, h);
      EXPECT_EQ(nan_count(r, 1 + i, h), sees ? 1 : 0) << "row " << i << " head " << h;
      if (sees) EXPECT_TRUE(std::isnan(row(r.output.view(), 1 + i, h)[60]));
    }
  }
  for (int h = 0; h < kHeads; ++h) EXPECT_EQ(nan_count(r, 0, h), 0);
}

// A context key already in the cache: request 0's key 5 (block_table[0][0], offset 5), KV head 1.
TEST_P(CpuNaN, InACachedKeyReachesTheDecodeRow) {
  const TensorView& cache = batch_->kv_cache.view();
  const int32_t block = batch_->block_table.data<int32_t>()[0];
  float* key = static_cast<float*>(cache.data()) + block * cache.stride(0) + 5 * cache.stride(2) +
               1 * cache.stride(3);
  key[0] = kNaN;
  const RunResult r = run(*batch_);
  for (int h = 0; h < kHeads; ++h) EXPECT_EQ(all_nan(r, 0, h), h >= 2) << "head " << h;
  for (int t = 1; t <= 10; ++t) EXPECT_FALSE(all_nan(r, t, 3)) << "token " << t;
}

INSTANTIATE_TEST_SUITE_P(Simd, CpuNaN, ::testing::ValuesIn(cpu::simd_targets_available()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pagedattn::cpu_test
