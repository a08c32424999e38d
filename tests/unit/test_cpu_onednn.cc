// Prefill chunks on oneDNN (bf16 queries and cache, AVX-512 with bf16 dot products): the same
// answer as the float64 reference within the usual tolerance, and NaN still reaches exactly the
// rows that see it. Where oneDNN is absent the tile path runs and the same checks hold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/onednn_tiles.h"
#include "common/numeric.h"
#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

constexpr int kHeads = 8, kKvHeads = 2, kDim = 128;
constexpr int kTokens = 300;  // causal: later rows see whole chunks of 256 and 64 keys

testing::CaseSpec chunk_case(bool causal) {
  testing::CaseSpec spec;
  spec.name = "onednn_chunks";
  spec.seed = 91;
  spec.dtype = DType::kBF16;
  spec.num_heads = kHeads;
  spec.num_kv_heads = kKvHeads;
  spec.head_size = kDim;
  spec.block_size = 16;
  spec.seq_lens = {kTokens};
  spec.query_lens = {kTokens};
  spec.causal = causal;
  return spec;
}

int nan_count(const RunResult& r, int64_t token, int head) {
  const TensorView out = r.output.view();
  int nans = 0;
  for (int d = 0; d < kDim; ++d) {
    const int64_t i = token * out.stride(0) + head * out.stride(1) + d;
    nans += std::isnan(load_as_float(out.data(), out.dtype(), i)) ? 1 : 0;
  }
  return nans;
}

TEST(CpuOnednn, ReportsWhatItUses) {
  EXPECT_FALSE(cpu::onednn_tiles_description().empty());
}

TEST(CpuOnednn, ChunksMatchTheReference) {
  for (const bool causal : {false, true}) {
    auto batch = testing::make_host_batch(chunk_case(causal), KVCacheLayout::kNHD);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    auto result = run_against_reference(*batch);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_TRUE(result->comparison.pass) << "causal " << causal << "\n" << result->comparison.detail;
  }
}

// A NaN in the value of key 10, KV head 0 (query heads 0-3), element 9: every causal row from 10
// on has it in its output (chunked rows too), the rows before it and the other heads do not.
TEST(CpuOnednn, NaNInAValueReachesTheRowsThatSeeIt) {
  auto batch = testing::make_host_batch(chunk_case(true), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  const TensorView value = batch->value.view();
  store_from_float(value.data(), value.dtype(), 10 * value.stride(0) + 9,
                   std::numeric_limits<float>::quiet_NaN());
  auto result = run_against_reference(*batch);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  for (int t = 0; t < kTokens; t += 7) {
    for (int h = 0; h < kHeads; ++h) {
      EXPECT_EQ(nan_count(*result, t, h), t >= 10 && h < 4 ? 1 : 0) << "row " << t << " head " << h;
    }
  }
}

}  // namespace
}  // namespace pagedattn::cpu_test
