// CPU_ATTN rejects what it cannot serve with a Status naming the parameter: layer parameters
// (make_impl), builder parameters and step metadata (build), and each forward argument.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_metadata.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu {
namespace {

using testing::HostBatch;
using testing::HostTensor;

AttentionImplParams good_params() {
  AttentionImplParams p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_size = 64;
  p.dtype = DType::kBF16;
  return p;
}

void expect_rejected(const AttentionImplParams& p, const std::string& needle,
                     StatusCode code = StatusCode::kInvalidArgument) {
  auto impl = make_impl(p);
  ASSERT_FALSE(impl.ok()) << needle;
  EXPECT_EQ(impl.status().code(), code) << impl.status().to_string();
  EXPECT_NE(impl.status().message().find(needle), std::string::npos) << impl.status().message();
}

TEST(CpuImplParamsTest, AcceptsTheSupportedRange) {
  for (int head_size = 32; head_size <= 512; head_size += 8) {
    AttentionImplParams p = good_params();
    p.head_size = head_size;
    EXPECT_TRUE(make_impl(p).ok()) << head_size;
  }
  AttentionImplParams largest_scale = good_params();
  largest_scale.scale = AttentionImplParams::kMaxScale;
  EXPECT_TRUE(make_impl(largest_scale).ok());
  AttentionImplParams p = good_params();
  p.attn_type = AttentionType::kEncoderOnly;
  p.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  p.sliding_window = {-1, 4};
  p.alibi_slopes.assign(8, 0.5f);
  p.sinks.assign(8, 1.0f);
  p.logits_soft_cap = 30.0f;
  auto impl = make_impl(p);
  ASSERT_TRUE(impl.ok()) << impl.status().to_string();
  EXPECT_EQ((*impl)->kernel_generation(), "cpu");
}

TEST(CpuImplParamsTest, RejectsEachBadParameter) {
  auto with = [](auto edit) {
    AttentionImplParams p = good_params();
    edit(p);
    return p;
  };
  expect_rejected(with([](auto& p) { p.head_size = 36; }), "head_size = 36");
  expect_rejected(with([](auto& p) { p.head_size = 24; }), "head_size = 24");
  expect_rejected(with([](auto& p) { p.head_size = 520; }), "head_size = 520");
  expect_rejected(with([](auto& p) { p.num_kv_heads = 3; }), "num_kv_heads = 3");
  expect_rejected(with([](auto& p) { p.num_heads = 0; }), "num_heads = 0");
  expect_rejected(with([](auto& p) { p.dtype = DType::kFP8E4M3; }), "dtype = fp8_e4m3");
  expect_rejected(with([](auto& p) { p.alibi_slopes.assign(4, 1.0f); }), "alibi_slopes");
  expect_rejected(with([](auto& p) { p.sinks.assign(9, 1.0f); }), "sinks");
  expect_rejected(with([](auto& p) { p.sinks.assign(8, NAN); }), "sinks");
  expect_rejected(with([](auto& p) { p.sliding_window = {-2, 0}; }), "sliding_window");
  expect_rejected(with([](auto& p) { p.scale = NAN; }), "scale");
  // Scores are float32: a scale that overflows them for ordinary inputs is refused, not NaN.
  expect_rejected(with([](auto& p) { p.scale = 3e38f; }), "scale = 3e+38 is not allowed");
  expect_rejected(with([](auto& p) { p.kernel_generation = 5; }), "kernel_generation = 5");
  expect_rejected(with([](auto& p) { p.fp8_tensor_cores = true; }),
                  "fp8_tensor_cores needs an e4m3 cache");
  expect_rejected(with([](auto& p) { p.logits_soft_cap = INFINITY; }), "logits_soft_cap");
  expect_rejected(with([](auto& p) { p.device = Device::cuda(0); }), "device");
  expect_rejected(with([](auto& p) { p.attn_type = AttentionType::kEncoderDecoder; }), "attn_type",
                  StatusCode::kUnimplemented);
}

TEST(CpuBuilderTest, ParametersAndMetadataAreChecked) {
  BuilderParams p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_size = 64;
  p.block_size = 0;
  EXPECT_NE(make_builder(p).status().message().find("block_size"), std::string::npos);
  p.block_size = 16;
  p.device = Device::cuda(0);
  EXPECT_NE(make_builder(p).status().message().find("device"), std::string::npos);
  p.device = Device::cpu();
  p.num_kv_heads = 3;
  EXPECT_NE(make_builder(p).status().message().find("num_kv_heads"), std::string::npos);
  p.num_kv_heads = 2;
  auto builder = make_builder(p);
  ASSERT_TRUE(builder.ok());
  EXPECT_EQ((*builder)->cudagraph_support(), AttentionCGSupport::kNever);
  EXPECT_FALSE((*builder)->reorder_batch_threshold().has_value());

  testing::CaseSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.seq_lens = {20, 3};
  s.query_lens = {4, 3};
  auto batch = testing::make_host_batch(s, KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE((*builder)->build(0, batch->metadata()).ok());
  // A step whose sequence is shorter than its query is refused by
  // CommonAttentionMetadata::validate.
  batch->seq_lens.data<int32_t>()[1] = 2;
  auto bad = (*builder)->build(0, batch->metadata());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("seq_lens"), std::string::npos) << bad.status().message();
}

struct AttentionMetadataFromElsewhere : AttentionMetadata {};

class CpuForwardErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::CaseSpec s;
    s.dtype = DType::kBF16;
    s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.head_size = 64;
    s.block_size = 16;
    s.seq_lens = {20, 35};
    s.query_lens = {4, 1};
    auto batch = testing::make_host_batch(s, KVCacheLayout::kNHD);
    ASSERT_TRUE(batch.ok());
    b_ = std::make_unique<HostBatch>(std::move(*batch));
    impl_ = make_impl(b_->params).value();
    BuilderParams bp;
    bp.num_heads = 8;
    bp.num_kv_heads = 2;
    bp.head_size = 64;
    bp.block_size = 16;
    bp.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    md_ = make_builder(bp).value()->build(0, b_->metadata()).value();
    out_ = HostTensor(DType::kBF16, {5, 8, 64});
    lse_ = HostTensor(DType::kF32, {8, 5});
  }
  Status forward(const TensorView& q, const TensorView& cache, const TensorView& out,
                 const TensorView& lse, const KVScales& scales) {
    return impl_->forward(q, b_->key.view(), b_->value.view(), cache, *md_, out, lse, scales);
  }
  void expect_error(const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  std::unique_ptr<HostBatch> b_;
  std::unique_ptr<AttentionImpl> impl_;
  std::unique_ptr<AttentionMetadata> md_;
  HostTensor out_, lse_;
};

TEST_F(CpuForwardErrors, EachArgumentIsChecked) {
  const TensorView q = b_->query.view(), cache = b_->kv_cache.view();
  const TensorView out = out_.view(), lse = lse_.view();
  const KVScales scales = b_->scales();
  ASSERT_TRUE(forward(q, cache, out, lse, scales).ok());

  AttentionMetadataFromElsewhere foreign;
  expect_error(
      impl_->forward(q, b_->key.view(), b_->value.view(), cache, foreign, out, lse, scales),
      "metadata");
  HostTensor f16_q(DType::kF16, {5, 8, 64});
  expect_error(forward(f16_q.view(), cache, out, lse, scales), "query");
  HostTensor short_q(DType::kBF16, {4, 8, 64});
  expect_error(forward(short_q.view(), cache, out, lse, scales), "query");
  HostTensor wrong_heads(DType::kBF16, {5, 4, 64});
  expect_error(forward(wrong_heads.view(), cache, out, lse, scales), "query");
  const int64_t shape[] = {5, 8, 32};
  const int64_t strides[] = {8 * 64, 64, 2};
  const TensorView strided(b_->query.view().data(), DType::kBF16, Device::cpu(), shape, strides);
  AttentionImplParams p32 = b_->params;  // head_size 32 to match the strided view
  HostTensor out32(DType::kBF16, {5, 8, 32});
  p32.head_size = 32;
  auto impl32 = make_impl(p32);
  ASSERT_TRUE(impl32.ok());
  BuilderParams bp32;
  bp32.num_heads = 8;
  bp32.num_kv_heads = 2;
  bp32.head_size = 32;
  bp32.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  auto md32 = make_builder(bp32).value()->build(0, b_->metadata()).value();
  HostTensor cache32(DType::kFP8E4M3, {cache.size(0), 2, 16, 2, 32});
  expect_error((*impl32)->forward(strided, TensorView(), TensorView(), cache32.view(), *md32,
                                  out32.view(), TensorView(), scales),
               "unit stride");
  HostTensor out_short(DType::kBF16, {3, 8, 64});
  expect_error(forward(q, cache, out_short.view(), lse, scales), "output");
  HostTensor lse_wrong(DType::kF32, {5, 8});
  expect_error(forward(q, cache, out, lse_wrong.view(), scales), "output_lse");
  HostTensor bf16_cache(DType::kBF16, {cache.size(0), 2, 16, 2, 64});
  expect_error(forward(q, bf16_cache.view(), out, lse, scales), "kv_cache");
  HostTensor bs8_cache(DType::kFP8E4M3, {cache.size(0), 2, 8, 2, 64});
  expect_error(forward(q, bs8_cache.view(), out, lse, scales), "kv_cache");
  HostTensor tiny_cache(DType::kFP8E4M3, {1, 2, 16, 2, 64});
  expect_error(forward(q, tiny_cache.view(), out, lse, scales), "block_table");
  HostTensor neg_scale(DType::kF32, {1});
  neg_scale.data<float>()[0] = -1.0f;
  expect_error(forward(q, cache, out, lse, {neg_scale.view(), scales.v_scale}), "k_scale");
  HostTensor scale3(DType::kF32, {3});
  expect_error(forward(q, cache, out, lse, {scales.k_scale, scale3.view()}), "v_scale");
}

}  // namespace
}  // namespace pagedattn::cpu
