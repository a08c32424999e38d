// CPU_ATTN's do_kv_cache_update: bit-exact copies for 16/32-bit caches, exact FP8 codes
// (saturate(x / scale), nearest even) with per-tensor and per-head scales, both layouts, padding
// slots skipped, nothing else in the cache touched, and each validation rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "common/numeric.h"
#include "testing/host_batch.h"
#include "testing/host_cache_write.h"

namespace pagedattn::cpu {
namespace {

using testing::CaseSpec;
using testing::HostBatch;
using testing::HostTensor;

CaseSpec spec_for(DType dtype, KVCacheDType kv, bool per_head, int block_size) {
  CaseSpec s;
  s.seed = 11;
  s.dtype = dtype;
  s.kv_cache_dtype = kv;
  s.kv_scale_per_head = per_head;
  s.num_heads = 6;
  s.num_kv_heads = 3;
  s.head_size = 40;
  s.block_size = block_size;
  s.seq_lens = {21, 5, 40};
  s.query_lens = {4, 5, 1};
  return s;
}

std::vector<unsigned char> bytes_of(const TensorView& t) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

// The cache bytes expected after writing token t's K/V (encoded by `encode`) at its slot.
void expect_cache_after_update(const HostBatch& b, const std::vector<unsigned char>& before,
                               const std::vector<int64_t>& slots, const KVScales& scales) {
  const TensorView& c = b.kv_cache.view();
  std::vector<unsigned char> want = before;
  const TensorView want_view(want.data(), c.dtype(), c.device(), c.shape(), c.strides());
  testing::write_tokens_on_host(b.key.view(), b.value.view(), slots, scales, want_view);
  const std::vector<unsigned char> got = bytes_of(c);
  ASSERT_EQ(got.size(), want.size());
  int64_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0) << "cache bytes differ from the expected cache";
}

struct WriteCase {
  DType dtype;
  KVCacheDType kv;
  bool per_head;
  int block_size;
  KVCacheLayout layout;
};

std::string write_case_name(const WriteCase& c) {
  return std::string(dtype_name(c.dtype)) + "_" + std::string(kv_cache_dtype_name(c.kv)) +
         (c.per_head ? "_per_head" : "") + "_block_" + std::to_string(c.block_size) + "_" +
         std::string(kv_cache_layout_name(c.layout));
}
void PrintTo(const WriteCase& c, std::ostream* os) { *os << write_case_name(c); }

class CacheWrite : public ::testing::TestWithParam<WriteCase> {};

TEST_P(CacheWrite, WritesExactlyTheSlots) {
  const WriteCase w = GetParam();
  auto batch =
      testing::make_host_batch(spec_for(w.dtype, w.kv, w.per_head, w.block_size), w.layout);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  HostBatch& b = *batch;
  auto impl = make_impl(b.params);
  ASSERT_TRUE(impl.ok()) << impl.status().to_string();
  // Padding: token 2 and the last token are not written.
  std::vector<int64_t> slots(b.slot_mapping.data<int64_t>(),
                             b.slot_mapping.data<int64_t>() + b.spec.num_tokens());
  slots[2] = -1;
  slots.back() = -1;
  std::memcpy(b.slot_mapping.data<int64_t>(), slots.data(), slots.size() * sizeof(int64_t));
  const std::vector<unsigned char> before = bytes_of(b.kv_cache.view());
  ASSERT_TRUE((*impl)
                  ->do_kv_cache_update(b.key.view(), b.value.view(), b.kv_cache.view(),
                                       b.slot_mapping.view(), b.scales())
                  .ok());
  expect_cache_after_update(b, before, slots, b.scales());
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CacheWrite,
    ::testing::Values(
        WriteCase{DType::kF32, KVCacheDType::kAuto, false, 16, KVCacheLayout::kNHD},
        WriteCase{DType::kF16, KVCacheDType::kAuto, false, 1, KVCacheLayout::kHND},
        WriteCase{DType::kBF16, KVCacheDType::kAuto, false, 32, KVCacheLayout::kNHD},
        WriteCase{DType::kBF16, KVCacheDType::kAuto, false, 16, KVCacheLayout::kHND},
        WriteCase{DType::kBF16, KVCacheDType::kFloat16, false, 16, KVCacheLayout::kNHD},
        WriteCase{DType::kBF16, KVCacheDType::kFP8E4M3, false, 16, KVCacheLayout::kNHD},
        WriteCase{DType::kF16, KVCacheDType::kFP8E4M3, true, 8, KVCacheLayout::kHND},
        WriteCase{DType::kF32, KVCacheDType::kFP8E5M2, false, 32, KVCacheLayout::kHND},
        WriteCase{DType::kBF16, KVCacheDType::kFP8E5M2, true, 1, KVCacheLayout::kNHD}),
    [](const ::testing::TestParamInfo<WriteCase>& info) { return write_case_name(info.param); });

TEST(CacheWriteTest, Fp8SaturatesAndKeepsNan) {
  auto batch = testing::make_host_batch(spec_for(DType::kF32, KVCacheDType::kFP8E4M3, false, 16),
                                        KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok());
  HostBatch& b = *batch;
  b.k_scale.data<float>()[0] = 0.5f;
  float* key = b.key.data<float>();
  key[0] = 1e6f;       // saturates to 448 * scale
  key[1] = -INFINITY;  // saturates to -448 * scale
  key[2] = NAN;
  key[3] = 0.75f;  // 1.5 exactly
  auto impl = make_impl(b.params);
  ASSERT_TRUE(impl.ok());
  ASSERT_TRUE((*impl)
                  ->do_kv_cache_update(b.key.view(), b.value.view(), b.kv_cache.view(),
                                       b.slot_mapping.view(), b.scales())
                  .ok());
  const TensorView& c = b.kv_cache.view();
  const int64_t slot = b.slot_mapping.data<int64_t>()[0];
  const auto* row =
      static_cast<const uint8_t*>(c.data()) + (slot / 16) * c.stride(0) + (slot % 16) * c.stride(2);
  EXPECT_EQ(row[0], 0x7E);
  EXPECT_EQ(row[1], 0xFE);
  EXPECT_EQ(row[2], 0x7F);
  EXPECT_EQ(fp8_e4m3_to_float(row[3]), 1.5f);
}

class CacheWriteErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto batch = testing::make_host_batch(spec_for(DType::kBF16, KVCacheDType::kFP8E4M3, true, 16),
                                          KVCacheLayout::kNHD);
    ASSERT_TRUE(batch.ok());
    b_ = std::make_unique<HostBatch>(std::move(*batch));
    auto impl = make_impl(b_->params);
    ASSERT_TRUE(impl.ok());
    impl_ = std::move(*impl);
  }
  Status update(const TensorView& key, const TensorView& value, const TensorView& cache,
                const TensorView& slots, const KVScales& scales) {
    return impl_->do_kv_cache_update(key, value, cache, slots, scales);
  }
  void expect_error(const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  std::unique_ptr<HostBatch> b_;
  std::unique_ptr<AttentionImpl> impl_;
};

TEST_F(CacheWriteErrors, EachRuleNamesItsParameter) {
  HostBatch& b = *b_;
  const TensorView key = b.key.view(), value = b.value.view(), cache = b.kv_cache.view();
  const TensorView slots = b.slot_mapping.view();
  const KVScales scales = b.scales();
  ASSERT_TRUE(update(key, value, cache, slots, scales).ok());

  HostTensor bad_slots(DType::kI64, {slots.size(0)});
  std::memcpy(bad_slots.data<int64_t>(), slots.data(), slots.nbytes());
  bad_slots.data<int64_t>()[1] = cache.size(0) * cache.size(2);  // one past the last slot
  expect_error(update(key, value, cache, bad_slots.view(), scales), "slot_mapping[1]");
  bad_slots.data<int64_t>()[1] = -2;
  expect_error(update(key, value, cache, bad_slots.view(), scales), "slot_mapping[1]");

  HostTensor i32_slots(DType::kI32, {slots.size(0)});
  expect_error(update(key, value, cache, i32_slots.view(), scales), "slot_mapping");
  HostTensor short_key(DType::kBF16, {1, 3, 40});
  expect_error(update(short_key.view(), value, cache, slots, scales), "key");
  HostTensor f32_value(DType::kF32, {key.size(0), 3, 40});
  expect_error(update(key, f32_value.view(), cache, slots, scales), "value");
  HostTensor wrong_heads(DType::kBF16, {key.size(0), 2, 40});
  expect_error(update(key, wrong_heads.view(), cache, slots, scales), "value");
  HostTensor bf16_cache(DType::kBF16, {cache.size(0), 2, 16, 3, 40});
  expect_error(update(key, value, bf16_cache.view(), slots, scales), "kv_cache");
  HostTensor narrow_cache(DType::kFP8E4M3, {cache.size(0), 2, 16, 3, 32});
  expect_error(update(key, value, narrow_cache.view(), slots, scales), "kv_cache");
  HostTensor two_scales(DType::kF32, {2});
  two_scales.data<float>()[0] = two_scales.data<float>()[1] = 1.0f;
  expect_error(update(key, value, cache, slots, {two_scales.view(), scales.v_scale}), "k_scale");
  HostTensor zero_scale(DType::kF32, {1});
  zero_scale.data<float>()[0] = 0.0f;
  expect_error(update(key, value, cache, slots, {scales.k_scale, zero_scale.view()}), "v_scale");
  expect_error(update(TensorView(), value, cache, slots, scales), "key");
  expect_error(update(key, value, TensorView(), slots, scales), "kv_cache");
}

}  // namespace
}  // namespace pagedattn::cpu
