// The GPU-backend layer's checks are host code: they read shapes, strides and devices, never device
// memory, so they are tested here on views that only claim to live on cuda:0 (FLASH_ATTN's
// description supplies the names, dtypes, block and head sizes). Also the one common_prefix_len
// contract that every backend's build() applies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/common_prefix.h"
#include "backends/factories.h"
#include "backends/gpu/checks.h"
#include "testing/host_batch.h"

namespace pagedattn::gpu {
namespace {

const Device kGpu = Device::cuda(0);

void expect_error(const Status& s, const std::string& words) {
  ASSERT_FALSE(s.ok()) << "expected an error naming '" << words << "'";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

// The same bytes, claimed to live on `device` (the checks never dereference device views).
TensorView on(const TensorView& t, const Device& device) {
  return TensorView(t.data(), t.dtype(), device, t.shape(), t.strides());
}

BuilderParams builder_params() {
  BuilderParams p;
  p.num_heads = 12;
  p.num_kv_heads = 4;
  p.head_size = 128;
  p.block_size = 32;
  p.device = kGpu;
  return p;
}

AttentionImplParams impl_params() {
  AttentionImplParams p;
  p.num_heads = 12;
  p.num_kv_heads = 4;
  p.head_size = 128;
  p.device = kGpu;
  return p;
}

TEST(GpuLayerChecks, BuilderParamsNameTheBackendAndWhatIsAllowed) {
  const AttentionBackend& fa = flash_attn_backend();
  EXPECT_TRUE(check_builder_params(fa, builder_params()).ok());
  // Each row changes one field of the accepted params.
  const struct {
    void (*change)(BuilderParams&);
    const char* words;
  } refusals[] = {
      {[](BuilderParams& p) { p.device = Device::cpu(); }, "FLASH_ATTN builder: device is cpu"},
      {[](BuilderParams& p) { p.num_kv_heads = 5; }, "num_heads % num_kv_heads"},
      {[](BuilderParams& p) { p.block_size = 24; }, "block_size = 24; expected multiples of 16"},
      {[](BuilderParams& p) { p.dtype = DType::kF32; }, "dtype f32"},
      {[](BuilderParams& p) { p.head_size = 36; }, "head_size = 36"},
      {[](BuilderParams& p) { p.max_num_tokens = 0; }, "max_num_tokens"},
      {[](BuilderParams& p) { p.num_sms = -1; }, "FLASH_ATTN builder: num_sms = -1 (allowed: 0"},
  };
  for (const auto& refusal : refusals) {
    BuilderParams p = builder_params();
    refusal.change(p);
    expect_error(check_builder_params(fa, p), refusal.words);
  }
}

TEST(GpuLayerChecks, ImplParamsCheckPerHeadVectors) {
  AttentionImplParams p = impl_params();
  EXPECT_TRUE(check_impl_params(flash_attn_backend(), p).ok());
  p.sinks = {1.0f, 2.0f};
  expect_error(check_impl_params(flash_attn_backend(), p), "FLASH_ATTN impl: sinks has 2 entries");
  p.sinks.clear();
  p.alibi_slopes.assign(13, 0.5f);
  expect_error(check_impl_params(flash_attn_backend(), p), "alibi_slopes has 13 entries");
}

// Cross-attention needs the encoder's lengths, which the step's metadata does not carry: both GPU
// impls refuse it, as the selector does, instead of running it as self-attention.
TEST(GpuLayerChecks, ImplParamsRefuseCrossAttention) {
  AttentionImplParams p = impl_params();
  for (const AttentionBackend* backend : {&flash_attn_backend(), &flashinfer_backend()}) {
    for (const AttentionType type :
         {AttentionType::kDecoder, AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
      p.attn_type = type;
      EXPECT_TRUE(check_impl_params(*backend, p).ok()) << attention_type_name(type);
    }
    p.attn_type = AttentionType::kEncoderDecoder;
    const Status s = check_impl_params(*backend, p);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
    EXPECT_NE(s.message().find(std::string(backend->name()) +
                               " impl: attn_type = encoder_decoder is not supported (allowed: "
                               "decoder, encoder, encoder_only)"),
              std::string::npos)
        << s.message();
  }
}

class GpuStepChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::CaseSpec s;
    s.num_heads = 12;
    s.num_kv_heads = 4;
    s.head_size = 128;
    s.block_size = 32;
    s.seq_lens = {70, 5, 300};
    s.query_lens = {3, 5, 1};
    StatusOr<testing::HostBatch> b = testing::make_host_batch(s, KVCacheLayout::kHND);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    batch_ = std::move(b).value();
    meta_ = batch_.metadata();
    meta_.query_start_loc = on(meta_.query_start_loc, kGpu);
    meta_.seq_lens = on(meta_.seq_lens, kGpu);
    meta_.block_table_tensor = on(meta_.block_table_tensor, kGpu);
    meta_.slot_mapping = on(meta_.slot_mapping, kGpu);
    params_ = impl_params();
    params_.kv_layout = KVCacheLayout::kHND;
    cache_dtype_ = kv_cache_storage_dtype(params_.kv_cache_dtype, params_.dtype);
    BuilderParams bp = builder_params();
    step_ = step_info(bp, meta_);
    query_ = on(batch_.query.view(), kGpu);
    cache_ = on(batch_.kv_cache.view(), kGpu);
    out_ = testing::HostTensor(DType::kBF16, {9, 12, 128});
    lse_ = testing::HostTensor(DType::kF32, {12, 9});
  }
  Status forward(const TensorView& query, const TensorView& out, const TensorView& lse,
                 const KVScales& scales = {}) const {
    return check_forward(params_, cache_dtype_, step_, query, cache_, out, lse, scales);
  }

  testing::HostBatch batch_;
  CommonAttentionMetadata meta_;
  AttentionImplParams params_;
  DType cache_dtype_ = DType::kBF16;
  StepInfo step_;
  TensorView query_, cache_;
  testing::HostTensor out_, lse_;
};

TEST_F(GpuStepChecks, StepFitsTheBuilderAndLivesOnItsDevice) {
  EXPECT_TRUE(check_step(builder_params(), meta_).ok());
  BuilderParams small = builder_params();
  small.max_num_reqs = 2;
  expect_error(check_step(small, meta_), "num_reqs = 3 exceeds the builder's max_num_reqs = 2");
  small = builder_params();
  small.max_model_len = 100;
  expect_error(check_step(small, meta_), "max_seq_len = 300");
  CommonAttentionMetadata m = meta_;
  m.seq_lens = on(m.seq_lens, Device::cuda(1));
  expect_error(check_step(builder_params(), m), "seq_lens must be on cuda:0");
  m = meta_;
  m.block_table_tensor = batch_.block_table.view();  // host
  expect_error(check_step(builder_params(), m), "block_table_tensor must be on cuda:0");
}

TEST_F(GpuStepChecks, ForwardChecksTheLayerAgainstTheMetadata) {
  const TensorView out = on(out_.view(), kGpu), lse = on(lse_.view(), kGpu);
  EXPECT_TRUE(forward(query_, out, lse).ok());
  EXPECT_TRUE(forward(query_, out, TensorView()).ok());  // LSE not requested
  StepInfo other = step_;
  other.layer.num_kv_heads = 2;
  expect_error(check_forward(params_, cache_dtype_, other, query_, cache_, out, lse, {}),
               "metadata was built for num_kv_heads = 2 (BuilderParams); this layer has "
               "num_kv_heads = 4 (AttentionImplParams)");
  other = step_;
  other.device_index = 1;
  expect_error(check_forward(params_, cache_dtype_, other, query_, cache_, out, lse, {}),
               "metadata was built for cuda:1");
  other = step_;
  other.block_size = 16;
  expect_error(check_forward(params_, cache_dtype_, other, query_, cache_, out, lse, {}),
               "differs from the builder's block_size 16");
  expect_error(forward(batch_.query.view(), out, lse), "query");  // on the host
  testing::HostTensor short_out(DType::kBF16, {8, 12, 128});
  expect_error(forward(query_, on(short_out.view(), kGpu), lse), "output is");
  testing::HostTensor bad_lse(DType::kF32, {4, 9});
  expect_error(forward(query_, out, on(bad_lse.view(), kGpu)), "output_lse is");
  expect_error(check_forward(params_, DType::kFP8E4M3, step_, query_, cache_, out, lse, {}),
               "kv_cache");
  testing::HostTensor scale(DType::kF32, {4});
  const KVScales only_k{on(scale.view(), kGpu), TensorView()};
  expect_error(forward(query_, out, lse, only_k), "k_scale and v_scale");
  testing::HostTensor three(DType::kF32, {3});
  const KVScales wrong{on(three.view(), kGpu), on(three.view(), kGpu)};
  expect_error(forward(query_, out, lse, wrong), "k_scale has 3 elements");
}

// The fields builder and impl both carry must agree (FLASHINFER sizes its decode work from the
// builder's dtypes), and the cache must be strided in the layout both were made for.
TEST_F(GpuStepChecks, ForwardChecksTheBuildersSpecAndTheCacheLayout) {
  const TensorView out = on(out_.view(), kGpu), lse = on(lse_.view(), kGpu);
  const auto forward_with = [&](const backends::LayerSpec& layer) {
    StepInfo other = step_;
    other.layer = layer;
    return check_forward(params_, cache_dtype_, other, query_, cache_, out, lse, {});
  };
  backends::LayerSpec layer = step_.layer;
  layer.dtype = DType::kF16;
  expect_error(forward_with(layer), "metadata was built for dtype = f16 (BuilderParams)");
  layer = step_.layer;
  layer.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  expect_error(forward_with(layer),
               "kv_cache_dtype = fp8_e4m3 (BuilderParams); this layer has "
               "kv_cache_dtype = auto");
  layer.kv_cache_dtype = KVCacheDType::kBFloat16;  // what auto stores under a bf16 model
  EXPECT_TRUE(forward_with(layer).ok());

  AttentionImplParams nhd = params_;
  nhd.kv_layout = KVCacheLayout::kNHD;
  const Status s = check_cache(nhd, cache_dtype_, cache_);
  expect_error(s, "kv_layout = NHD (the layout the impl was made for) but kv_cache");
  EXPECT_NE(s.message().find("is strided HND"), std::string::npos) << s.message();
  expect_error(check_cache_update(nhd, cache_dtype_, on(batch_.key.view(), kGpu),
                                  on(batch_.value.view(), kGpu), cache_),
               "kv_layout = NHD");
}

TEST(CommonPrefixContract, CascadeFeaturesInTheSameWordsForEveryBackend) {
  const backends::CascadeFeatures none;
  EXPECT_TRUE(backends::check_cascade_features("X", 0, true, true, none).ok());
  expect_error(backends::check_cascade_features("X", 32, true, false, none),
               "X cannot run cascade attention with ALiBi");
  expect_error(backends::check_cascade_features("X", 32, false, true, none), "sliding window");
  EXPECT_TRUE(backends::check_cascade_features("X", 32, true, true, {true, true}).ok());
}

}  // namespace
}  // namespace pagedattn::gpu
