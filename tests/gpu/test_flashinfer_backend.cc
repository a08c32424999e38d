// FLASHINFER end to end on the GPU (cache write, build, forward) against the float64 oracle, over
// FLASH_ATTN's grid: head sizes, GQA groups, pages 16 to 1024 in both layouts, f16/bf16 with
// auto/FP8 caches and per-tensor/per-head scales, every feature, plan reuse across layers,
// deterministic mode, and vLLM's page arrays.
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/attention/paged_attention.h"
#include "backends/flashinfer/metadata.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Decodes (one of a 1-token sequence, one long enough for the decode plan to cut), speculative
// verification (4: a prefill under threshold 1), a whole prefill, a chunked prefill and a padding
// request (query_len 0), in batch order: the runner reorders them decode-first.
CaseSpec mixed(std::string name, uint64_t seed = 1) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = seed;
  s.seq_lens = {37, 300, 1, 5000, 64, 1100, 250, 40};
  s.query_lens = {1, 4, 1, 1, 64, 1, 50, 0};
  return s;
}

CaseSpec small_heads(CaseSpec s) {
  s.num_heads = 8;
  s.num_kv_heads = 2;
  return s;
}

class FlashInferHeadSize : public ::testing::TestWithParam<int> {};

TEST_P(FlashInferHeadSize, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const int d = GetParam();
  if (kernels::paged_attention_kernel_head_size(d) == 0) {
    GTEST_SKIP() << "head size " << d << " has no kernel in this build";
  }
  CaseSpec s = mixed("head_size_" + std::to_string(d), 10 + d);
  s.head_size = d;
  expect_flashinfer_matches_oracle(s);
  s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  s.name += "_fp8";
  expect_flashinfer_matches_oracle(small_heads(s), KVCacheLayout::kHND);
}

INSTANTIATE_TEST_SUITE_P(Grid, FlashInferHeadSize,
                         ::testing::Values(32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 200, 256,
                                           512));

struct Heads {
  int hq, hkv;
};
class FlashInferGqa : public ::testing::TestWithParam<Heads> {};

TEST_P(FlashInferGqa, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const Heads h = GetParam();
  CaseSpec s = mixed("gqa_" + std::to_string(h.hq) + "_" + std::to_string(h.hkv), 3);
  s.num_heads = h.hq;
  s.num_kv_heads = h.hkv;
  expect_flashinfer_matches_oracle(s);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.kv_scale_per_head = true;
  s.name += "_fp8_head";
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kHND);
}

// Groups 1, 4, 7, 8, 16 and 64 (four 16-row tiles per decode).
INSTANTIATE_TEST_SUITE_P(Grid, FlashInferGqa,
                         ::testing::Values(Heads{8, 8}, Heads{32, 8}, Heads{28, 4}, Heads{64, 8},
                                           Heads{32, 2}, Heads{64, 1}));

struct BlockLayout {
  int block_size;
  KVCacheLayout layout;
};
class FlashInferBlocks : public ::testing::TestWithParam<BlockLayout> {};

TEST_P(FlashInferBlocks, MixedBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const BlockLayout p = GetParam();
  CaseSpec s = small_heads(mixed("block_" + std::to_string(p.block_size), 20 + p.block_size));
  s.block_size = p.block_size;
  expect_flashinfer_matches_oracle(s, p.layout);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.name += "_fp8";
  expect_flashinfer_matches_oracle(s, p.layout);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashInferBlocks,
    ::testing::Values(BlockLayout{16, KVCacheLayout::kNHD}, BlockLayout{16, KVCacheLayout::kHND},
                      BlockLayout{32, KVCacheLayout::kHND}, BlockLayout{64, KVCacheLayout::kNHD},
                      BlockLayout{128, KVCacheLayout::kHND}, BlockLayout{256, KVCacheLayout::kNHD},
                      BlockLayout{512, KVCacheLayout::kHND}, BlockLayout{1024, KVCacheLayout::kNHD},
                      BlockLayout{1024, KVCacheLayout::kHND}));

struct Dtypes {
  DType dtype;
  KVCacheDType kv;
  bool per_head;
};
class FlashInferDtypes : public ::testing::TestWithParam<Dtypes> {};

TEST_P(FlashInferDtypes, MixedBatchBothLayouts) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const Dtypes p = GetParam();
  CaseSpec s = small_heads(mixed(std::string(dtype_name(p.dtype)) + "_" +
                                     std::string(kv_cache_dtype_name(p.kv)) +
                                     (p.per_head ? "_head" : ""),
                                 5));
  s.dtype = p.dtype;
  s.kv_cache_dtype = p.kv;
  s.kv_scale_per_head = p.per_head;
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kNHD);
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kHND);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashInferDtypes,
    ::testing::Values(Dtypes{DType::kF16, KVCacheDType::kAuto, false},
                      Dtypes{DType::kBF16, KVCacheDType::kAuto, false},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E4M3, false},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E4M3, true},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E5M2, true},
                      Dtypes{DType::kF16, KVCacheDType::kFP8E5M2, false},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E4M3, true},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E4M3, false},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E5M2, false},
                      Dtypes{DType::kBF16, KVCacheDType::kFP8E5M2, true}));

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
class FlashInferFeatures : public ::testing::TestWithParam<Feature> {};

TEST_P(FlashInferFeatures, MixedBatch) {
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
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kNHD);
  expect_flashinfer_matches_oracle(small_heads(s), KVCacheLayout::kHND);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, FlashInferFeatures,
    ::testing::Values(
        Feature{.name = "non_causal", .causal = false},
        Feature{.name = "decoder_window", .window = SlidingWindow{63, 0}},
        Feature{.name = "long_window", .window = SlidingWindow{2000, 0}},
        Feature{.name = "encoder_window", .causal = false, .window = SlidingWindow{31, 31}},
        Feature{.name = "softcap", .softcap = 30.0},
        Feature{.name = "alibi", .alibi = true},
        Feature{.name = "sinks", .sinks = true},
        Feature{.name = "alibi_window_softcap", .window = SlidingWindow{127, 0}, .softcap = 20.0,
                .alibi = true},
        Feature{.name = "sinks_window_fp8", .window = SlidingWindow{63, 0}, .sinks = true,
                .kv = KVCacheDType::kFP8E4M3},
        Feature{.name = "sinks_softcap_f16_e5m2", .softcap = 15.0, .sinks = true,
                .kv = KVCacheDType::kFP8E5M2, .dtype = DType::kF16},
        Feature{.name = "alibi_noncausal_fp8_e5m2", .causal = false, .alibi = true,
                .kv = KVCacheDType::kFP8E5M2}),
    [](const ::testing::TestParamInfo<Feature>& info) { return info.param.name; });

// Decode-only batches the decode plan cuts into pieces (merged by the combine), with features.
TEST(FlashInferDecodePlan, LongAndShortDecodes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "long_short_decodes";
  s.seq_lens = {20000, 7, 3000, 129, 40000};
  s.query_lens = {1, 1, 1, 1, 1};
  expect_flashinfer_matches_oracle(s);
  s.sinks = true;
  s.logits_soft_cap = 25.0;
  s.sliding_window = SlidingWindow{5000, 0};
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.name += "_features_fp8";
  expect_flashinfer_matches_oracle(s, KVCacheLayout::kHND);
}

// One build, several layers: forward again over the same metadata gives the oracle's result.
TEST(FlashInferPlan, ReusedAcrossLayers) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  FlashInferRun r = run_flashinfer(mixed("reuse", 41), KVCacheLayout::kNHD);
  ASSERT_NE(r.runner, nullptr);
  EXPECT_TRUE(r.cmp.pass) << r.cmp.detail;
  for (int layer = 1; layer < 3; ++layer) {
    ASSERT_TRUE(r.runner->placement().poison_outputs().ok());
    ASSERT_TRUE(r.runner->execute(/*write_cache=*/false).ok());
    auto again = r.runner->verify();
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_TRUE(again->pass) << "layer " << layer << ": " << again->detail;
  }
}

// Deterministic mode: the first request's output bits are the same whatever follows it in the
// batch and however many SMs the plan spreads it over.
TEST(FlashInferDeterminism, OutputDoesNotDependOnTheBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec a;
  a.name = "det_a";
  a.seed = 5;
  a.sinks = true;
  a.seq_lens = {9000, 300, 20000, 2000};
  a.query_lens = {1, 1, 1, 30};
  CaseSpec b = a;
  b.name = "det_b";
  b.seq_lens = {9000, 70, 100};
  b.query_lens = {1, 5, 1};
  std::vector<std::vector<uint16_t>> firsts;
  for (const CaseSpec& spec : {a, b}) {
    for (int sms : {132, 5}) {
      FlashInferRun r = run_flashinfer(spec, KVCacheLayout::kNHD, [&](BuilderParams& bp) {
        bp.deterministic = true;
        bp.num_sms = sms;
      });
      ASSERT_NE(r.runner, nullptr);
      EXPECT_TRUE(r.cmp.pass) << spec.name << ": " << r.cmp.detail;
      const TensorView& out = r.runner->output().view();
      const int64_t row = out.size(1) * out.size(2);  // token 0: the first request's one token
      const auto* bits = static_cast<const uint16_t*>(out.data());
      firsts.emplace_back(bits, bits + row);
    }
  }
  for (size_t i = 1; i < firsts.size(); ++i) EXPECT_EQ(firsts[i], firsts[0]) << "run " << i;
}

// vLLM's page arrays (flashinfer.py): cumulative page counts and seq % page (page when full).
TEST(FlashInferPlan, PageArraysAreVllms) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = small_heads(mixed("arrays", 9));
  s.block_size = 32;
  FlashInferRun r = run_flashinfer(s, KVCacheLayout::kNHD);
  ASSERT_NE(r.runner, nullptr);
  // The builder's metadata is internal to the runner; rebuild one to read the arrays.
  const AttentionBackend* backend = find_backend("FLASHINFER");
  auto builder = backend->make_builder(testing::builder_params_for(
      r.runner->spec(), KVCacheLayout::kNHD, Device::cuda(0)));
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  auto dev = testing::upload_batch(r.runner->batch(), 0);
  ASSERT_TRUE(dev.ok());
  auto md = (*builder)->build(0, (*dev)->metadata());
  ASSERT_TRUE(md.ok()) << md.status().to_string();
  const auto& fi = dynamic_cast<const flashinfer::FlashInferMetadata&>(**md);
  const std::vector<int>& seqs = r.runner->spec().seq_lens;
  int pages = 0;
  EXPECT_EQ(fi.paged_kv_indptr[0], 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    pages += (seqs[i] + 31) / 32;
    EXPECT_EQ(fi.paged_kv_indptr[i + 1], pages);
    EXPECT_EQ(fi.paged_kv_last_page_len[i], seqs[i] % 32 == 0 ? 32 : seqs[i] % 32);
  }
  // Decodes first (threshold 1; a one-token request over a one-token sequence is a new prefill
  // for vLLM's reorder): the leading one-token requests, and the rest as prefills.
  const std::vector<int>& q_lens = r.runner->spec().query_lens;
  EXPECT_GE(fi.parts.num_decodes, 2);
  EXPECT_EQ(fi.parts.num_decode_tokens, fi.parts.num_decodes);
  EXPECT_EQ(fi.parts.num_decodes + fi.parts.num_prefills, static_cast<int>(q_lens.size()));
  for (int i = 0; i < fi.parts.num_decodes; ++i) EXPECT_EQ(q_lens[i], 1) << i;
  EXPECT_GT(fi.decode_stats.num_units, 0);
}

}  // namespace
}  // namespace pagedattn::test
