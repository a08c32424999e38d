// FLASHINFER end to end on the GPU (cache write, build, forward) against the float64 oracle: the
// GPU backends' grid (backend_grid.h: pages 16 to 1024 in both layouts, every feature), split
// decode plans, plan reuse across layers, deterministic mode, and vLLM's page arrays.
#include <string>
#include <vector>

#include "backend_grid.h"
#include "backends/flashinfer/metadata.h"
#include "cuda_test_support.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

void expect_flashinfer(const CaseSpec& spec, KVCacheLayout layout) {
  expect_flashinfer_matches_oracle(spec, layout);
}

PAGEDATTN_GPU_BACKEND_GRID(FlashInfer, expect_flashinfer);

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
  FlashInferRun r = run_flashinfer(grid::mixed("reuse", 41), KVCacheLayout::kNHD);
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

// Encoder layers with a cache run bidirectionally in a causal step; the one-token requests go to
// the decode kernel, where both masks agree.
TEST(FlashInferBackend, EncoderLayersAreBidirectionalInACausalStep) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "encoder_in_causal_step";
  s.seed = 39;
  s.seq_lens = s.query_lens = {1, 7, 128, 300, 1, 45};
  for (const AttentionType type : {AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
    expect_encoder_layer_bidirectional("FLASHINFER", s, type);
  }
}

// Cross-attention is refused by make_impl (the selector refuses it too).
TEST(FlashInferBackend, RefusesCrossAttention) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  AttentionImplParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_size = 128;
  p.device = Device::cuda(0);
  p.attn_type = AttentionType::kEncoderDecoder;
  StatusOr<std::unique_ptr<AttentionImpl>> impl = find_backend("FLASHINFER")->make_impl(p);
  ASSERT_FALSE(impl.ok());
  EXPECT_EQ(impl.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(impl.status().message().find("attn_type = encoder_decoder"), std::string::npos)
      << impl.status().message();
}

// A split bound is refused, not ignored: the decode plan cuts work units with no per-request bound.
TEST(FlashInferBackend, RefusesASplitBound) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  BuilderParams bp = testing::builder_params_for(grid::mixed("split_bound", 3), Device::cuda(0));
  ASSERT_TRUE(find_backend("FLASHINFER")->make_builder(bp).ok());
  bp.max_num_splits = 1;
  const Status s = find_backend("FLASHINFER")->make_builder(bp).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_num_splits = 1"), std::string::npos) << s.message();
}

// vLLM's page arrays (flashinfer.py): cumulative page counts and seq % page (page when full).
TEST(FlashInferPlan, PageArraysAreVllms) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = grid::small_heads(grid::mixed("arrays", 9));
  s.block_size = 32;
  FlashInferRun r = run_flashinfer(s, KVCacheLayout::kNHD);
  ASSERT_NE(r.runner, nullptr);
  // The builder's metadata is internal to the runner; rebuild one to read the arrays.
  const AttentionBackend* backend = find_backend("FLASHINFER");
  auto builder = backend->make_builder(testing::builder_params_for(
      r.runner->spec(), Device::cuda(0)));
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
