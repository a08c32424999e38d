// Cascade: vLLM's use_cascade_attention rule (exact decisions), CPU_ATTN's (that rule where the
// shared keys outgrow the last-level cache), the one contract (build() runs the prefix it is given), and the prefix + suffix + merge path equal to
// plain attention (and to the oracle) with every feature, ALiBi and windows included.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_metadata.h"
#include "backends/cpu/last_level_cache.h"
#include "common/numeric.h"
#include "pagedattn/ops.h"
#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;

std::vector<int32_t> lens(int n, int32_t value) {
  return std::vector<int32_t>(n, value);
}

TEST(CascadeRuleTest, FollowsFlashAttentionsHeuristic) {
  const auto prefill = lens(8, 5);
  const auto decode = lens(8, 1);
  // Thresholds: prefix length, masks, batch size, DCP.
  EXPECT_FALSE(cascade_attention_pays_off(255, prefill, 32, 8, false, false, false, 132, 1));
  EXPECT_TRUE(cascade_attention_pays_off(256, prefill, 32, 8, false, false, false, 132, 1));
  EXPECT_FALSE(cascade_attention_pays_off(4096, prefill, 32, 8, true, false, false, 132, 1));
  EXPECT_FALSE(cascade_attention_pays_off(4096, prefill, 32, 8, false, true, false, 132, 1));
  EXPECT_FALSE(cascade_attention_pays_off(4096, prefill, 32, 8, false, false, true, 132, 1));
  EXPECT_FALSE(cascade_attention_pays_off(4096, lens(7, 5), 32, 8, false, false, false, 132, 1));
  EXPECT_FALSE(cascade_attention_pays_off(4096, prefill, 32, 8, false, false, false, 132, 2));
  // Without FlashDecoding (MHA, or any query longer than 1) cascade always pays.
  EXPECT_TRUE(cascade_attention_pays_off(256, decode, 32, 32, false, false, false, 132, 1));
  // All-decode GQA: the cost model. 8 requests, 32/8 heads, 256 prefix (2 tiles):
  // cascade = ceil(32 / sms) * 2, flash decoding = ceil(8 * 8 * 2 / sms).
  EXPECT_FALSE(
      cascade_attention_pays_off(256, decode, 32, 8, false, false, false, 132, 1));  // 2 vs 1
  EXPECT_TRUE(
      cascade_attention_pays_off(256, decode, 32, 8, false, false, false, 2, 1));  // 32 vs 64
  EXPECT_FALSE(
      cascade_attention_pays_off(256, decode, 32, 8, false, false, false, 64, 1));  // 2 vs 2
  // 200 requests: cascade = ceil(32 * 2 / 132) * 8 = 8, fd = ceil(200 * 8 * 8 / 132) = 97.
  EXPECT_TRUE(cascade_attention_pays_off(1024, lens(200, 1), 32, 8, false, false, false, 132, 1));
}

BuilderParams builder_params(int block_size) {
  BuilderParams p;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_size = 64;
  p.block_size = block_size;
  return p;
}

CaseSpec shared_prefix_spec(int num_reqs, int prefix, int block_size) {
  CaseSpec s;
  s.seed = 77;
  s.dtype = DType::kF32;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.block_size = block_size;
  s.common_prefix_len = prefix;
  for (int r = 0; r < num_reqs; ++r) {
    s.query_lens.push_back(r % 3 == 0 ? 1 + r : 1);
    s.seq_lens.push_back(prefix + s.query_lens.back() + 3 * r);
  }
  return s;
}

TEST(CascadeBuilderTest, AsksWhereSharedKeysOutgrowTheCacheAndBuildRunsWhatItIsGiven) {
  auto batch = testing::make_host_batch(shared_prefix_spec(8, 256, 16), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  BuilderParams alibi = builder_params(16);
  alibi.use_alibi = true;
  for (const BuilderParams& bp : {builder_params(16), alibi}) {
    auto builder = cpu::make_builder(bp);
    ASSERT_TRUE(builder.ok());
    // The shared rule (cascade_attention_pays_off), once one layer's shared keys outgrow the
    // last-level cache; never before, where the shared rule would ask.
    const std::vector<int32_t> q = {5, 1, 1, 1, 2, 1, 1, 9};
    const int64_t token_bytes = 2 * bp.num_kv_heads * bp.head_size *
                                dtype_size(kv_cache_storage_dtype(bp.kv_cache_dtype, bp.dtype));
    const int fits = static_cast<int>(cpu::last_level_cache_bytes() / token_bytes) / 16 * 16;
    const int outgrows = fits + 256;
    ASSERT_TRUE(cascade_attention_pays_off(outgrows, q, 4, 2, false, false, false, 2, 1));
    for (bool with_alibi : {false, true}) {
      if (fits >= 256) {
        ASSERT_TRUE(cascade_attention_pays_off(fits, q, 4, 2, false, false, false, 2, 1));
        EXPECT_FALSE(
            (*builder)->use_cascade_attention(fits, q, 4, 2, with_alibi, false, false, 2, 1));
      }
      EXPECT_EQ(
          (*builder)->use_cascade_attention(outgrows, q, 4, 2, with_alibi, false, false, 2, 1),
          cascade_attention_pays_off(outgrows, q, 4, 2, with_alibi, false, false, 2, 1));
    }
    // build() never decides again: a prefix below the rule's 256, or with ALiBi, still runs.
    for (int cpl : {0, 128, 256}) {
      auto built = (*builder)->build(cpl, batch->metadata());
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      EXPECT_EQ(dynamic_cast<const cpu::CpuAttentionMetadata&>(**built).common_prefix_len, cpl);
    }
    // Not a block multiple, negative, or past a request's context: errors naming common_prefix_len.
    for (int bad : {250, -16, 4096}) {
      auto s = (*builder)->build(bad, batch->metadata());
      ASSERT_FALSE(s.ok()) << bad;
      EXPECT_NE(s.status().message().find("common_prefix_len"), std::string::npos);
    }
  }
}

TEST(CudaGraphCaptureTest, OnlyTheCaptureBuildMarksMetadataGraphSafe) {
  auto batch = testing::make_host_batch(shared_prefix_spec(3, 64, 16), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  auto builder = cpu::make_builder(builder_params(16));
  ASSERT_TRUE(builder.ok());
  auto eager = (*builder)->build(64, batch->metadata());
  auto capture = (*builder)->build_for_cudagraph_capture(batch->metadata());
  ASSERT_TRUE(eager.ok() && capture.ok());
  EXPECT_FALSE((*eager)->for_cudagraph_capture);
  EXPECT_TRUE((*capture)->for_cudagraph_capture);
  // A captured step never cascades.
  EXPECT_EQ(dynamic_cast<const cpu::CpuAttentionMetadata&>(**capture).common_prefix_len, 0);
}

struct CascadeCase {
  const char* name;
  int num_reqs, prefix, block_size;
  DType dtype;
  KVCacheDType kv;
  bool sinks;
  double soft_cap;
  bool causal;
  KVCacheLayout layout;
  bool alibi = false;
  std::optional<SlidingWindow> window = std::nullopt;
};

void PrintTo(const CascadeCase& c, std::ostream* os) {
  *os << c.name;
}

class CascadeEqualsPlain : public ::testing::TestWithParam<CascadeCase> {};

TEST_P(CascadeEqualsPlain, SameAsPlainAndOracle) {
  const CascadeCase& c = GetParam();
  CaseSpec s = shared_prefix_spec(c.num_reqs, c.prefix, c.block_size);
  s.dtype = c.dtype;
  s.kv_cache_dtype = c.kv;
  s.kv_scale_per_head = true;
  s.sinks = c.sinks;
  s.logits_soft_cap = c.soft_cap;
  s.causal = c.causal;
  s.alibi = c.alibi;
  s.sliding_window = c.window;
  auto batch = testing::make_host_batch(s, c.layout);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  RunOptions cascade;
  cascade.cascade = testing::CascadeMode::kAlways;
  auto with_cascade = run_against_reference(*batch, cascade);
  ASSERT_TRUE(with_cascade.ok()) << with_cascade.status().to_string();
  EXPECT_EQ(with_cascade->cascade_prefix_len, c.prefix);
  EXPECT_TRUE(with_cascade->comparison.pass) << with_cascade->comparison.detail;

  testing::HostBatch& b = *batch;
  b.spec.common_prefix_len = 0;  // the same batch as plain attention
  auto plain = run_forward_only(b);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->cascade_prefix_len, 0);
  EXPECT_TRUE(plain->comparison.pass) << plain->comparison.detail;
  const TensorView a = with_cascade->output.view(), p = plain->output.view();
  const double tol = c.dtype == DType::kF32 ? 2e-5 : 1e-2;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(load_as_float(a.data(), a.dtype(), i), load_as_float(p.data(), p.dtype(), i), tol)
        << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CascadeEqualsPlain,
    ::testing::Values(CascadeCase{"f32_bs16", 8, 256, 16, DType::kF32, KVCacheDType::kAuto, false,
                                  0, true, KVCacheLayout::kNHD},
                      CascadeCase{"sinks_softcap_hnd", 3, 64, 16, DType::kF32, KVCacheDType::kAuto,
                                  true, 5.0, true, KVCacheLayout::kHND},
                      CascadeCase{"bf16_bs1", 4, 37, 1, DType::kBF16, KVCacheDType::kAuto, true, 0,
                                  true, KVCacheLayout::kNHD},
                      CascadeCase{"f16_fp8_e4m3", 5, 96, 32, DType::kF16, KVCacheDType::kFP8E4M3,
                                  false, 0, true, KVCacheLayout::kHND},
                      CascadeCase{"noncausal_fp8_e5m2", 3, 48, 16, DType::kF32,
                                  KVCacheDType::kFP8E5M2, true, 0, false, KVCacheLayout::kNHD},
                      // CPU_ATTN's passes keep absolute positions: ALiBi and windows (one that
                      // reaches into the prefix for some queries and not for others) stay exact.
                      CascadeCase{"alibi_sinks", 6, 64, 16, DType::kF32, KVCacheDType::kAuto, true,
                                  0, true, KVCacheLayout::kNHD, /*alibi=*/true},
                      CascadeCase{"window_bf16", 5, 96, 32, DType::kBF16, KVCacheDType::kAuto,
                                  true, 0, true, KVCacheLayout::kHND, false, SlidingWindow{40, 0}},
                      CascadeCase{"alibi_window_noncausal", 4, 48, 16, DType::kF32,
                                  KVCacheDType::kAuto, false, 0, false, KVCacheLayout::kNHD, true,
                                  SlidingWindow{20, 7}}));

TEST(CascadeForwardTest, RuleDeclinedPrefixRunsPlain) {
  auto batch = testing::make_host_batch(shared_prefix_spec(8, 256, 16), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok());
  auto result = run_against_reference(*batch);  // num_sms = threads; 8 requests with prefills
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  // CPU_ATTN's rule declines 256 shared keys, which fit the last-level cache: the step runs plain.
  EXPECT_EQ(result->cascade_prefix_len, 0);
  EXPECT_TRUE(result->comparison.pass) << result->comparison.detail;
}

}  // namespace
}  // namespace pagedattn::cpu_test
