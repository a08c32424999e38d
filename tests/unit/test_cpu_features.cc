// CPU_ATTN forward beyond the grid: encoder attention without a cache, no LSE, CUDA-graph padding
// tokens, a 32k context, a float16 cache under a bf16 model, FP8 stored as u8, strided query and
// output views, determinism across runs, and empty rows at the kernel level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/cpu_backend.h"
#include "common/numeric.h"
#include "reference/attention_ref.h"
#include "support/cpu_run.h"
#include "testing/batch_params.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;
using testing::HostBatch;
using testing::HostTensor;

CaseSpec base_spec() {
  CaseSpec s;
  s.seed = 5;
  s.dtype = DType::kBF16;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.block_size = 16;
  s.seq_lens = {40, 7, 90};
  s.query_lens = {3, 7, 1};
  return s;
}

HostBatch make(const CaseSpec& s, KVCacheLayout layout = KVCacheLayout::kNHD) {
  auto b = testing::make_host_batch(s, layout);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

std::unique_ptr<AttentionMetadata> build(const HostBatch& b, const CommonAttentionMetadata& meta) {
  const BuilderParams bp = testing::builder_params_for(b.spec, Device::cpu());
  return cpu::make_builder(bp).value()->build(0, meta).value();
}

reference::ReferenceOutputs oracle(const HostBatch& b, const TensorView& query) {
  reference::ReferenceInputs in = testing::reference_inputs(b, b.kv_cache.view());
  in.query = query;
  return reference::reference_attention(in, b.params).value();
}

void expect_matches_reference(HostBatch b) {
  auto r = run_against_reference(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->comparison.pass) << r->comparison.detail;
}

void write_cache(HostBatch& b) {
  auto impl = cpu::make_impl(b.params).value();
  ASSERT_TRUE(impl->do_kv_cache_update(b.key.view(), b.value.view(), b.kv_cache.view(),
                                       b.slot_mapping.view(), b.scales())
                  .ok());
}

TEST(CpuFeaturesTest, EncoderAttentionReadsTheNewTokensWithoutACache) {
  CaseSpec s = base_spec();
  s.causal = false;
  s.seq_lens = {12, 30, 1};
  s.query_lens = {12, 30, 1};
  HostBatch b = make(s);
  write_cache(b);  // only so that the oracle, which reads the cache, sees the same keys
  AttentionImplParams p = b.params;
  p.attn_type = AttentionType::kEncoder;
  auto impl = cpu::make_impl(p).value();
  auto md = build(b, b.metadata());
  HostTensor out(DType::kBF16, {43, 8, 64}), lse(DType::kF32, {8, 43});
  const Status st = impl->forward(b.query.view(), b.key.view(), b.value.view(), TensorView(), *md,
                                  out.view(), lse.view(), {});
  ASSERT_TRUE(st.ok()) << st.to_string();
  const auto ref = oracle(b, b.query.view());
  const auto c = reference::compare_to_reference(out.view(), lse.view(), ref.out, ref.lse,
                                                 reference::tolerance_for(DType::kBF16));
  EXPECT_TRUE(c.pass) << c.detail;
}

TEST(CpuFeaturesTest, WithoutLse) {
  HostBatch b = make(base_spec());
  RunOptions o;
  o.want_lse = false;
  auto r = run_against_reference(b, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->comparison.pass) << r->comparison.detail;
  EXPECT_TRUE(std::isnan(r->lse.data<float>()[0]));  // untouched
}

TEST(CpuFeaturesTest, PaddingTokensGetZerosAndEmptyLse) {
  HostBatch b = make(base_spec());
  write_cache(b);
  // Two CUDA-graph padding tokens after the 11 real ones.
  HostTensor query(DType::kBF16, {13, 8, 64});
  std::memcpy(query.view().data(), b.query.view().data(), b.query.view().nbytes());
  for (int64_t i = 11 * 8 * 64; i < 13 * 8 * 64; ++i)
    store_from_float(query.view().data(), DType::kBF16, i, 1.0f);
  CommonAttentionMetadata meta = b.metadata();
  meta.num_actual_tokens = 13;
  HostTensor slots(DType::kI64, {13});
  std::memcpy(slots.view().data(), b.slot_mapping.view().data(), 11 * sizeof(int64_t));
  slots.data<int64_t>()[11] = slots.data<int64_t>()[12] = -1;
  meta.slot_mapping = slots.view();
  auto md = build(b, meta);
  auto impl = cpu::make_impl(b.params).value();
  HostTensor out(DType::kBF16, {13, 8, 64}), lse(DType::kF32, {8, 13});
  for (int64_t i = 0; i < 13 * 8 * 64; ++i)
    store_from_float(out.view().data(), DType::kBF16, i, NAN);
  ASSERT_TRUE(impl->forward(query.view(), b.key.view(), b.value.view(), b.kv_cache.view(), *md,
                            out.view(), lse.view(), b.scales())
                  .ok());
  for (int64_t i = 11 * 8 * 64; i < 13 * 8 * 64; ++i) {
    ASSERT_EQ(load_as_float(out.view().data(), DType::kBF16, i), 0.0f) << i;
  }
  for (int h = 0; h < 8; ++h) {
    EXPECT_EQ(lse.data<float>()[h * 13 + 11], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isfinite(lse.data<float>()[h * 13 + 10]));
  }
}

TEST(CpuFeaturesTest, LongContextDecode) {
  CaseSpec s = base_spec();
  s.dtype = DType::kF32;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.block_size = 256;
  s.seq_lens = {32768, 3000};
  s.query_lens = {1, 2};
  expect_matches_reference(make(s, KVCacheLayout::kHND));
}

TEST(CpuFeaturesTest, Float16CacheUnderABf16Model) {
  CaseSpec s = base_spec();
  s.kv_cache_dtype = KVCacheDType::kFloat16;
  expect_matches_reference(make(s));
}

TEST(CpuFeaturesTest, Fp8CacheStoredAsU8) {
  CaseSpec s = base_spec();
  s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  HostBatch b = make(s, KVCacheLayout::kHND);
  write_cache(b);
  const TensorView& c = b.kv_cache.view();
  const TensorView as_u8(c.data(), DType::kU8, Device::cpu(), c.shape(), c.strides());
  auto impl = cpu::make_impl(b.params).value();
  auto md = build(b, b.metadata());
  HostTensor out(DType::kBF16, {11, 8, 64}), lse(DType::kF32, {8, 11});
  ASSERT_TRUE(impl->forward(b.query.view(), b.key.view(), b.value.view(), as_u8, *md, out.view(),
                            lse.view(), b.scales())
                  .ok());
  const auto ref = oracle(b, b.query.view());
  const auto cmp = reference::compare_to_reference(out.view(), lse.view(), ref.out, ref.lse,
                                                   reference::tolerance_for(DType::kBF16));
  EXPECT_TRUE(cmp.pass) << cmp.detail;
}

// Every finite FP8 code as a value: keys all zero make the softmax uniform, so each output is the
// mean of its column's values and a wrong decode of any code moves it past the f32 tolerance.
TEST(CpuFeaturesTest, EveryFp8CodeDecodesExactly) {
  for (KVCacheDType kv : {KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2}) {
    CaseSpec s = base_spec();
    s.dtype = DType::kF32;
    s.kv_cache_dtype = kv;
    s.num_heads = 2;
    s.num_kv_heads = 2;
    s.head_size = 128;
    s.block_size = 8;
    s.seq_lens = {8, 8};
    s.query_lens = {1, 1};
    HostBatch b = make(s, KVCacheLayout::kNHD);
    const bool e4m3 = kv == KVCacheDType::kFP8E4M3;
    const TensorView& c = b.kv_cache.view();
    const float value_scale = 0.75f;
    b.v_scale.data<float>()[0] = value_scale;
    int code = 0;
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 8; ++j) {
        const int64_t block = b.block_table.data<int32_t>()[r * b.block_table.view().size(1)];
        for (int h = 0; h < 2; ++h) {
          for (int d = 0; d < 128; ++d) {
            const int64_t at = block * c.stride(0) + j * c.stride(2) + h * c.stride(3) + d;
            static_cast<uint8_t*>(c.data())[at] = 0;  // key: +0
            // Skip the non-finite codes: e4m3 S.1111.111, e5m2 S.11111.xx.
            uint8_t v = static_cast<uint8_t>(code++ % 256);
            while (e4m3 ? (v & 0x7F) == 0x7F : (v & 0x7C) == 0x7C)
              v = static_cast<uint8_t>(code++ % 256);
            static_cast<uint8_t*>(c.data())[at + c.stride(1)] = v;
          }
        }
      }
    }
    auto r = run_forward_only(b);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->comparison.pass) << kv_cache_dtype_name(kv) << "\n" << r->comparison.detail;
    // And against the definition directly: output = mean over the 8 keys of decode(code) * scale.
    const float* out = r->output.data<float>();
    for (int h = 0; h < 2; ++h) {
      for (int d = 0; d < 128; ++d) {
        double want = 0.0;
        const int64_t block = b.block_table.data<int32_t>()[0];
        for (int j = 0; j < 8; ++j) {
          const uint8_t v = static_cast<const uint8_t*>(
              c.data())[block * c.stride(0) + c.stride(1) + j * c.stride(2) + h * c.stride(3) + d];
          want += (e4m3 ? fp8_e4m3_to_float(v) : fp8_e5m2_to_float(v)) * value_scale / 8.0;
        }
        ASSERT_NEAR(out[h * 128 + d], want, 1e-5 + 1e-5 * std::fabs(want)) << h << " " << d;
      }
    }
  }
}

TEST(CpuFeaturesTest, StridedQueryAndOutputViews) {
  // query is the first 8 heads of a packed [T, 8 + 2 + 2, D] qkv buffer; output has a padded head.
  HostBatch b = make(base_spec());
  write_cache(b);
  const int64_t t = 11, d = 64;
  HostTensor qkv(DType::kBF16, {t, 12, d}), wide_out(DType::kBF16, {t, 9, d});
  for (int64_t i = 0; i < t; ++i) {
    std::memcpy(static_cast<uint16_t*>(qkv.view().data()) + i * 12 * d,
                static_cast<const uint16_t*>(b.query.view().data()) + i * 8 * d, 8 * d * 2);
  }
  const int64_t shape[] = {t, 8, d};
  const int64_t q_strides[] = {12 * d, d, 1};
  const int64_t o_strides[] = {9 * d, d, 1};
  const TensorView query(qkv.view().data(), DType::kBF16, Device::cpu(), shape, q_strides);
  const TensorView out(wide_out.view().data(), DType::kBF16, Device::cpu(), shape, o_strides);
  auto impl = cpu::make_impl(b.params).value();
  auto md = build(b, b.metadata());
  ASSERT_TRUE(impl->forward(query, b.key.view(), b.value.view(), b.kv_cache.view(), *md, out,
                            TensorView(), b.scales())
                  .ok());
  const auto ref = oracle(b, b.query.view());
  const auto cmp = reference::compare_to_reference(out, TensorView(), ref.out, ref.lse,
                                                   reference::tolerance_for(DType::kBF16));
  EXPECT_TRUE(cmp.pass) << cmp.detail;
}

TEST(CpuFeaturesTest, RepeatedRunsAreBitIdentical) {
  CaseSpec s = base_spec();
  s.seq_lens = {300, 41, 77, 5, 260};
  s.query_lens = {1, 41, 1, 5, 20};
  HostBatch b = make(s);
  auto first = run_against_reference(b);
  auto second = run_forward_only(b);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(std::memcmp(first->output.view().data(), second->output.view().data(),
                        first->output.view().nbytes()),
            0);
  EXPECT_EQ(
      std::memcmp(first->lse.view().data(), second->lse.view().data(), first->lse.view().nbytes()),
      0);
}

TEST(CpuKernelTest, RowsWithoutKeysGiveZeroAndMinusInfOrTheSink) {
  // A pass whose requests have no keys at all (an empty cascade side).
  const int heads = 2, dim = 32;
  std::vector<float> query(3 * heads * dim, 1.0f), out(3 * heads * dim, NAN), lse(heads * 3, NAN);
  std::vector<float> sinks = {0.5f, -2.0f};
  cpu::AttentionPass pass;
  pass.query = query.data();
  pass.query_dtype = DType::kF32;
  pass.q_token_stride = heads * dim;
  pass.q_head_stride = dim;
  pass.output = out.data();
  pass.output_dtype = DType::kF32;
  pass.o_token_stride = heads * dim;
  pass.o_head_stride = dim;
  pass.lse = lse.data();
  pass.lse_head_stride = 3;
  pass.lse_token_stride = 1;
  pass.num_heads = heads;
  pass.num_kv_heads = 1;
  pass.head_size = dim;
  pass.kv.dtype = DType::kF32;
  pass.requests.push_back({0, 2, 5, nullptr, 0, 0, 0});
  pass.requests.push_back({2, 1, 0, nullptr, 0, 0, 0});
  cpu::run_attention_pass(pass);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  pass.sinks = sinks.data();
  cpu::run_attention_pass(pass);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  EXPECT_FLOAT_EQ(lse[0], 0.5f);
  EXPECT_FLOAT_EQ(lse[3 + 2], -2.0f);
}

}  // namespace
}  // namespace pagedattn::cpu_test
