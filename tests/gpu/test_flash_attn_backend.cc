// FLASH_ATTN end to end on the GPU (cache write, build, forward) against the float64 oracle, over
// the grid of the CPU issue: head sizes, GQA groups 1/4/7/8/16, block sizes 16/32/64/256, both
// layouts, f16/bf16 with auto/FP8 caches and per-tensor/per-head scales, each feature and
// combinations, and batches that make the builder split KV.
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/attention/paged_attention.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Decode, decode over a 1-token sequence, speculative verification (4), a long decode, a whole
// prefill, a chunked prefill and a padding request (query_len 0).
CaseSpec mixed(std::string name, uint64_t seed = 1) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = seed;
  s.seq_lens = {37, 1, 300, 1100, 64, 250, 40};
  s.query_lens = {1, 1, 4, 1, 64, 50, 0};
  return s;
}

CaseSpec small_heads(CaseSpec s) {
  s.num_heads = 8;
  s.num_kv_heads = 2;
  return s;
}

bool head_size_built(int head_size) {
  return kernels::paged_attention_kernel_head_size(head_size) != 0;
}

class FlashAttnHeadSize : public ::testing::TestWithParam<int> {};

TEST_P(FlashAttnHeadSize, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const int d = GetParam();
  if (!head_size_built(d)) GTEST_SKIP() << "head size " << d << " has no kernel in this build";
  CaseSpec s = mixed("head_size_" + std::to_string(d), 10 + d);
  s.head_size = d;
  expect_matches_oracle(s);
}

// The instantiated sizes, and sizes served by the next larger kernel.
INSTANTIATE_TEST_SUITE_P(Grid, FlashAttnHeadSize,
                         ::testing::Values(32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 200, 256, 512));

struct Heads {
  int hq, hkv;
};
class FlashAttnGqa : public ::testing::TestWithParam<Heads> {};

TEST_P(FlashAttnGqa, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = mixed("gqa_" + std::to_string(GetParam().hq) + "_" + std::to_string(GetParam().hkv), 3);
  s.num_heads = GetParam().hq;
  s.num_kv_heads = GetParam().hkv;
  expect_matches_oracle(s);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.kv_scale_per_head = true;
  s.name += "_fp8_head";
  expect_matches_oracle(s, KVCacheLayout::kHND);
}

// Groups 1, 4, 7, 8 and 16.
INSTANTIATE_TEST_SUITE_P(Grid, FlashAttnGqa,
                         ::testing::Values(Heads{8, 8}, Heads{32, 8}, Heads{28, 4}, Heads{64, 8},
                                           Heads{32, 2}));

struct BlockLayout {
  int block_size;
  KVCacheLayout layout;
};
class FlashAttnBlocks : public ::testing::TestWithParam<BlockLayout> {};

TEST_P(FlashAttnBlocks, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const BlockLayout p = GetParam();
  CaseSpec s = mixed("block_" + std::to_string(p.block_size), 20 + p.block_size);
  s.block_size = p.block_size;
  expect_matches_oracle(s, p.layout);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashAttnBlocks,
    ::testing::Values(BlockLayout{16, KVCacheLayout::kNHD}, BlockLayout{16, KVCacheLayout::kHND},
                      BlockLayout{32, KVCacheLayout::kNHD}, BlockLayout{32, KVCacheLayout::kHND},
                      BlockLayout{64, KVCacheLayout::kNHD}, BlockLayout{64, KVCacheLayout::kHND},
                      BlockLayout{256, KVCacheLayout::kNHD}, BlockLayout{256, KVCacheLayout::kHND}));

struct Dtypes {
  DType dtype;
  KVCacheDType kv;
  bool per_head;
};
class FlashAttnDtypes : public ::testing::TestWithParam<Dtypes> {};

TEST_P(FlashAttnDtypes, MixedBatchBothLayouts) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const Dtypes p = GetParam();
  CaseSpec s = small_heads(mixed(std::string(dtype_name(p.dtype)) + "_" +
                                     std::string(kv_cache_dtype_name(p.kv)) + (p.per_head ? "_head" : ""),
                                 5));
  s.dtype = p.dtype;
  s.kv_cache_dtype = p.kv;
  s.kv_scale_per_head = p.per_head;
  expect_matches_oracle(s, KVCacheLayout::kNHD);
  expect_matches_oracle(s, KVCacheLayout::kHND);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashAttnDtypes,
    ::testing::Values(Dtypes{DType::kF16, KVCacheDType::kAuto, false},
                      Dtypes{DType::kBF16, KVCacheDType::kAuto, false},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E4M3, false},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E5M2, true},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E4M3, true},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E5M2, false}));

// One feature at a time, then combinations; every one over the mixed batch.
struct Feature {
  std::string name;
  bool causal = true;
  std::optional<SlidingWindow> window = std::nullopt;
  double softcap = 0.0;
  bool alibi = false;
  bool sinks = false;
  KVCacheDType kv = KVCacheDType::kAuto;
  DType dtype = DType::kBF16;
};
class FlashAttnFeatures : public ::testing::TestWithParam<Feature> {};

TEST_P(FlashAttnFeatures, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const Feature& f = GetParam();
  CaseSpec s = mixed(f.name, 7);
  s.causal = f.causal;
  s.sliding_window = f.window;
  s.logits_soft_cap = f.softcap;
  s.alibi = f.alibi;
  s.sinks = f.sinks;
  s.kv_cache_dtype = f.kv;
  s.dtype = f.dtype;
  expect_matches_oracle(s, KVCacheLayout::kNHD);
  expect_matches_oracle(small_heads(s), KVCacheLayout::kHND);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashAttnFeatures,
    ::testing::Values(Feature{.name = "non_causal", .causal = false},
                      Feature{.name = "decoder_window", .window = SlidingWindow{63, 0}},
                      Feature{.name = "encoder_window", .causal = false, .window = SlidingWindow{31, 31}},
                      Feature{.name = "left_window_only", .causal = false, .window = SlidingWindow{100, -1}},
                      Feature{.name = "softcap", .softcap = 30.0},
                      Feature{.name = "alibi", .alibi = true},
                      Feature{.name = "sinks", .sinks = true},
                      Feature{.name = "alibi_window_softcap", .window = SlidingWindow{127, 0},
                              .softcap = 20.0, .alibi = true},
                      Feature{.name = "sinks_window_fp8", .window = SlidingWindow{63, 0}, .sinks = true,
                              .kv = KVCacheDType::kFP8E4M3},
                      Feature{.name = "sinks_softcap_f16_noncausal", .causal = false, .softcap = 15.0,
                              .sinks = true, .dtype = DType::kF16},
                      Feature{.name = "alibi_noncausal_fp8_e5m2", .causal = false, .alibi = true,
                              .kv = KVCacheDType::kFP8E5M2}),
    [](const ::testing::TestParamInfo<Feature>& info) { return info.param.name; });

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
