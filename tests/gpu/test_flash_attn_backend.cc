// FLASH_ATTN end to end on the GPU (cache write, build, forward) against the float64 oracle: the
// GPU backends' grid (backend_grid.h), batches that make the builder split KV, and what it refuses.
#include <string>

#include "backend_grid.h"
#include "cuda_test_support.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

PAGEDATTN_GPU_BACKEND_GRID(FlashAttn, expect_matches_oracle);

// Batches the builder splits: one long decode (14 splits on 132 SMs), speculative verification,
// a long and a short decode together; with features that touch the split combine.
TEST(FlashAttnSplitKV, LongDecode) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "split_long_decode";
  s.seq_lens = {4096};
  s.query_lens = {1};
  expect_matches_oracle(s);
  s.name += "_sinks_fp8_hnd";
  s.sinks = true;
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  expect_matches_oracle(s, KVCacheLayout::kHND);
}

TEST(FlashAttnSplitKV, SpeculativeVerification) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "split_spec_verify";
  s.seq_lens = {3000, 5000, 2100};
  s.query_lens = {4, 4, 8};
  expect_matches_oracle(s);
}

TEST(FlashAttnSplitKV, LongAndShortDecodesWithWindowAndSoftcap) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "split_mixed_lengths";
  s.seq_lens = {9000, 600, 1, 300};
  s.query_lens = {1, 1, 1, 2};
  s.logits_soft_cap = 25.0;
  expect_matches_oracle(s);
  s.name += "_window_alibi";
  s.sliding_window = SlidingWindow{1000, 0};
  s.alibi = true;
  expect_matches_oracle(s, KVCacheLayout::kHND);
}

TEST(FlashAttnSplitKV, GroupOfSevenDecodeLargeBlocks) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "split_gqa7_block256";
  s.num_heads = 28;
  s.num_kv_heads = 4;
  s.block_size = 256;
  s.seq_lens = {5000, 2999};
  s.query_lens = {1, 3};
  s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  s.kv_scale_per_head = true;
  expect_matches_oracle(s);
}

// FLASH_ATTN reads attn_type: encoder layers run bidirectionally in a causal step.
TEST(FlashAttnBackend, EncoderLayersAreBidirectionalInACausalStep) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "encoder_in_causal_step";
  s.seed = 39;
  s.seq_lens = s.query_lens = {1, 7, 128, 300, 45};
  for (const AttentionType type : {AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
    expect_encoder_layer_bidirectional("FLASH_ATTN", s, type);
  }
}

TEST(FlashAttnBackend, RejectsWhatItCannotServe) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const AttentionBackend* backend = find_backend("FLASH_ATTN");
  ASSERT_NE(backend, nullptr);
  AttentionImplParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_size = 128;
  p.device = Device::cuda(0);
  p.dtype = DType::kF32;
  StatusOr<std::unique_ptr<AttentionImpl>> f32 = backend->make_impl(p);
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.status().message().find("f32"), std::string::npos) << f32.status().message();
  p.dtype = DType::kBF16;
  p.sinks = {1.0f, 2.0f};
  EXPECT_FALSE(backend->make_impl(p).ok());
  p.sinks.clear();
  p.attn_type = AttentionType::kEncoderDecoder;
  StatusOr<std::unique_ptr<AttentionImpl>> cross = backend->make_impl(p);
  ASSERT_FALSE(cross.ok());
  EXPECT_NE(cross.status().message().find("attn_type = encoder_decoder"), std::string::npos)
      << cross.status().message();
  BuilderParams bp;
  bp.device = Device::cuda(0);
  bp.num_heads = 32;
  bp.num_kv_heads = 8;
  bp.head_size = 128;
  bp.block_size = 24;
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> b = backend->make_builder(bp);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("block_size = 24"), std::string::npos) << b.status().message();
  bp.block_size = 16;
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> good = backend->make_builder(bp);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ((*good)->cudagraph_support(), AttentionCGSupport::kAlways);
  EXPECT_FALSE((*good)->reorder_batch_threshold().has_value());
}

}  // namespace
}  // namespace pagedattn::test
