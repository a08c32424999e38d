// FLASHINFER cascade (vLLM disables it for FlashInfer; ours runs): the shared prefix once, merged
// by LSE with the suffix, equal to plain attention (the oracle), sinks counted once; and a cascade
// the passes cannot express is refused by build().
#include <string>

#include "cuda_test_support.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

CaseSpec shared_prefix(std::string name) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = 11;
  s.seq_lens = {871, 280, 988, 2304, 257, 300, 512, 1000};
  s.query_lens = {129, 18, 37, 1, 1, 1, 1, 7};
  s.common_prefix_len = 256;
  return s;
}

TEST(FlashInferCascade, SharedPrefixMatchesPlainAttention) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_flashinfer_matches_oracle(shared_prefix("cascade"));
  CaseSpec s = shared_prefix("cascade_sinks_fp8_hnd");
  s.sinks = true;
  s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  s.kv_scale_per_head = true;
  s.logits_soft_cap = 30.0;
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kHND);
}

TEST(FlashInferCascade, DecodeBatchOverLongPrefix) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "cascade_decode";
  s.num_heads = 16;
  s.num_kv_heads = 2;
  s.block_size = 32;
  s.common_prefix_len = 4096;
  for (int r = 0; r < 16; ++r) {
    s.seq_lens.push_back(4097 + 61 * r);
    s.query_lens.push_back(1);
  }
  expect_flashinfer_matches_oracle(s);
}

TEST(FlashInferCascade, BuildRefusesCascadeWithAWindow) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = shared_prefix("cascade_window");
  s.sliding_window = SlidingWindow{100, 0};
  const AttentionBackend* backend = find_backend("FLASHINFER");
  testing::StepOptions options;
  options.cascade = testing::CascadeMode::kAlways;
  auto run = testing::StepRunner::prepare(s, *backend, Device::cuda(0), KVCacheLayout::kNHD,
                                          options);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const Status st = (*run)->build();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sliding window"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pagedattn::test
