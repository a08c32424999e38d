// FLASH_ATTN end to end on the GPU (cache write, build, forward) against the float64 oracle: the
// GPU backends' grid (backend_grid.h), batches that make the builder split KV, decode rows in any
// order beside prefills, deterministic mode, encoder layers in a causal step, and what it refuses.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_grid.h"
#include "backends/flash_attn/metadata.h"
#include "cuda_test_support.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

PAGEDATTN_GPU_BACKEND_GRID(FlashAttn, expect_matches_oracle);

// Batches whose long keys get cut: one long decode, speculative verification, a long and a short
// decode together, with features that touch the merge of the pieces (the decode plan's cut units;
// the paged pass's split combine: FlashAttnDecodePath.SplitPrefillRowsBesideDecodes).
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

// One step of `spec` through FLASH_ATTN with a deterministic builder planning for `num_sms` SMs:
// the first request's output rows (its query_lens[0] tokens), as bits.
std::vector<uint16_t> deterministic_first_rows(const CaseSpec& spec, int num_sms) {
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  if (!batch.ok()) return {};
  const KVCacheAllocation expected_cache = host_cache_after_write(*batch);
  testing::StepOptions options;
  options.builder_params = builder_params_for(*batch);
  options.builder_params->deterministic = true;
  options.builder_params->num_sms = num_sms;
  auto run =
      testing::StepRunner::for_batch(*batch, *find_backend("FLASH_ATTN"), Device::cuda(0), options);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  if (!run.ok()) return {};
  const Status st = (*run)->run_step();
  EXPECT_TRUE(st.ok()) << st.to_string();
  const reference::Comparison c = compare_with_oracle(**run, expected_cache);
  EXPECT_TRUE(c.pass) << spec.name << ": " << c.detail;
  const TensorView& out = (*run)->output().view();
  const auto* bits = static_cast<const uint16_t*>(out.data());
  return {bits, bits + spec.query_lens[0] * out.size(1) * out.size(2)};
}

// Deterministic mode (vLLM's batch invariance): no split-KV and one kernel whatever the batch's
// mix, so the first request's output bits are the same whatever follows it and however many SMs
// the builder plans for: a long decode, then a chunk of 30 tokens.
TEST(FlashAttnDeterminism, OutputDoesNotDependOnTheBatch) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const int first_query : {1, 30}) {
    CaseSpec a;
    a.name = "det_a";
    a.seed = 5;
    a.sinks = true;
    a.seq_lens = {9000, 300, 20000, 2000};
    a.query_lens = {first_query, 1, 1, 30};
    CaseSpec b = a;
    b.name = "det_b";
    b.seq_lens = {9000, 70, 100};
    b.query_lens = {first_query, 5, 1};
    CaseSpec alone = a;
    alone.name = "det_alone";
    alone.seq_lens = {9000};
    alone.query_lens = {first_query};
    std::vector<std::vector<uint16_t>> firsts;
    for (const CaseSpec& spec : {a, b, alone}) {
      for (const int sms : {132, 5}) firsts.push_back(deterministic_first_rows(spec, sms));
    }
    for (size_t i = 1; i < firsts.size(); ++i) {
      EXPECT_EQ(firsts[i], firsts[0]) << "first query " << first_query << ", run " << i;
    }
  }
}

// The metadata FLASH_ATTN builds for `spec` on 132 SMs, with `adjust` applied to its builder's
// parameters; nullptr (and a failure) where the build fails.
std::unique_ptr<AttentionMetadata> flash_attn_metadata(
    const CaseSpec& s, const std::function<void(BuilderParams&)>& adjust) {
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(s, KVCacheLayout::kNHD);
  auto dev = batch.ok() ? testing::upload_batch(*batch, 0) : batch.status();
  if (!dev.ok()) {
    ADD_FAILURE() << dev.status().to_string();
    return nullptr;
  }
  BuilderParams bp = builder_params_for(*batch);
  bp.num_sms = 132;
  adjust(bp);
  auto builder = find_backend("FLASH_ATTN")->make_builder(bp);
  auto md = builder.ok() ? (*builder)->build(0, (*dev)->metadata()) : builder.status();
  if (!md.ok()) {
    ADD_FAILURE() << md.status().to_string();
    return nullptr;
  }
  return std::move(md).value();
}

// The paged kernels' pass for one 12-token query over 4096 keys (a prefill-pass request short
// enough to split: 14 splits on 132 SMs by default).
std::optional<gpu::PassMetadata> long_decode_main_pass(
    const std::function<void(BuilderParams&)>& adjust) {
  CaseSpec s;
  s.seq_lens = {4096};
  s.query_lens = {12};
  const std::unique_ptr<AttentionMetadata> md = flash_attn_metadata(s, adjust);
  if (md == nullptr) return std::nullopt;
  return dynamic_cast<const flash_attn::FlashAttnMetadata&>(*md).main;
}

// The plan behind it: a query long enough to split runs unsplit, and on v2, when deterministic.
TEST(FlashAttnDeterminism, BuilderNeverSplits) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const auto free = long_decode_main_pass([](BuilderParams&) {});
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(free->max_splits_used, 1);
  const auto fixed = long_decode_main_pass([](BuilderParams& bp) { bp.deterministic = true; });
  ASSERT_TRUE(fixed.has_value());
  EXPECT_EQ(fixed->max_splits_used, 1);
  EXPECT_EQ(fixed->max_num_splits, 1);
  EXPECT_EQ(fixed->kernel, gpu::PassKernel::kV2);
}

// max_num_splits bounds that decode's schedule; a negative bound is refused.
TEST(FlashAttnDeterminism, MaxNumSplitsBoundsTheSchedule) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const int bound : {1, 3}) {
    const auto pass = long_decode_main_pass([&](BuilderParams& bp) { bp.max_num_splits = bound; });
    ASSERT_TRUE(pass.has_value());
    EXPECT_EQ(pass->max_num_splits, bound);
    EXPECT_EQ(pass->max_splits_used, bound);
  }
  BuilderParams negative;
  negative.num_heads = 32;
  negative.num_kv_heads = 8;
  negative.head_size = 128;
  negative.device = Device::cuda(0);
  negative.max_num_splits = -1;
  const Status refused = find_backend("FLASH_ATTN")->make_builder(negative).status();
  EXPECT_NE(refused.message().find("max_num_splits = -1"), std::string::npos)
      << refused.to_string();
}

// One call serves any order: decode rows (q_len <= 8) run the decode kernel, the rest one pass
// of the paged kernels that names its requests, with no reorder (vLLM's FLASH_ATTN contract).
TEST(FlashAttnDecodePath, DecodesInAnyOrderBesidePrefills) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "mixed_any_order";
  s.seed = 61;
  s.seq_lens = {4000, 300, 2048, 1, 700, 5000, 90, 129};
  s.query_lens = {1, 64, 1, 1, 8, 3, 90, 1};
  expect_matches_oracle(s);
  const std::unique_ptr<AttentionMetadata> md = flash_attn_metadata(s, [](BuilderParams&) {});
  ASSERT_NE(md, nullptr);
  const auto& fa = dynamic_cast<const flash_attn::FlashAttnMetadata&>(*md);
  EXPECT_TRUE(fa.decode.kernel);
  EXPECT_EQ(fa.num_decodes, 6);
  EXPECT_EQ(fa.decode_max_query_len, 8);
  EXPECT_EQ(fa.main.num_pass_reqs, 2);
  s.name += "_fp8_hnd_sinks_window_softcap";
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.kv_scale_per_head = true;
  s.sinks = true;
  s.sliding_window = SlidingWindow{500, 0};
  s.logits_soft_cap = 30.0;
  expect_matches_oracle(s, KVCacheLayout::kHND);
  s.name = "decodes_last_gqa7_block64";
  s.num_heads = 28;
  s.num_kv_heads = 4;
  s.block_size = 64;
  s.sinks = false;
  s.seq_lens = {3000, 41, 6000, 17};
  s.query_lens = {200, 41, 2, 1};
  expect_matches_oracle(s);
}

// A short query beside decodes splits its keys in the paged pass; the split combine then writes its
// rows only, leaving the decode kernel's (a combine over every row would overwrite them).
TEST(FlashAttnDecodePath, SplitPrefillRowsBesideDecodes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "split_prefill_beside_decodes";
  s.seed = 63;
  s.seq_lens = {3000, 6000, 40, 4000};
  s.query_lens = {1, 12, 1, 1};
  const std::unique_ptr<AttentionMetadata> md = flash_attn_metadata(s, [](BuilderParams&) {});
  ASSERT_NE(md, nullptr);
  const auto& fa = dynamic_cast<const flash_attn::FlashAttnMetadata&>(*md);
  EXPECT_EQ(fa.num_decodes, 3);
  EXPECT_EQ(fa.main.num_pass_reqs, 1);
  EXPECT_GT(fa.main.max_splits_used, 1);
  expect_matches_oracle(s);
  s.name += "_sinks_hnd";
  s.sinks = true;
  expect_matches_oracle(s, KVCacheLayout::kHND);
}

// Only a decode kernel's rows: no paged launch; and a split bound keeps every row on the paged
// kernels (the decode plan has no per-request bound).
TEST(FlashAttnDecodePath, PureDecodeStepsAndTheSplitBound) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s;
  s.name = "pure_decode";
  s.seed = 62;
  s.seq_lens = {6000, 10, 2500};
  s.query_lens = {1, 1, 4};
  expect_matches_oracle(s);
  const auto routed = flash_attn_metadata(s, [](BuilderParams&) {});
  ASSERT_NE(routed, nullptr);
  const auto& fa = dynamic_cast<const flash_attn::FlashAttnMetadata&>(*routed);
  EXPECT_TRUE(fa.decode.kernel);
  EXPECT_EQ(fa.main.num_pass_reqs, 0);
  const auto bounded = flash_attn_metadata(s, [](BuilderParams& bp) { bp.max_num_splits = 2; });
  ASSERT_NE(bounded, nullptr);
  EXPECT_FALSE(dynamic_cast<const flash_attn::FlashAttnMetadata&>(*bounded).decode.kernel);
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
  EXPECT_NE(b.status().message().find("block_size = 24"), std::string::npos)
      << b.status().message();
  bp.block_size = 16;
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> good = backend->make_builder(bp);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ((*good)->cudagraph_support(), AttentionCGSupport::kAlways);
  EXPECT_FALSE((*good)->reorder_batch_threshold().has_value());
}

}  // namespace
}  // namespace pagedattn::test
