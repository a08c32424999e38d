// The CUDA cache write (reshape_and_cache_flash): bit-identical to the host encoder of
// common/numeric.h for both layouts, 16-bit and FP8 caches, per-tensor and per-head scales;
// slot -1 leaves the cache untouched; and FP8 encoding on every kind of float (ties, subnormals,
// saturation, infinities, NaN).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/numeric.h"
#include "runtime/device_buffer.h"
#include "cuda_test_support.h"
#include "kernels/cache_write.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;
using testing::CaseSpec;

struct WriteCase {
  KVCacheLayout layout;
  DType dtype;
  KVCacheDType kv;
  bool per_head;
  int block_size;
};
std::string write_case_name(const WriteCase& c) {
  return std::string(kv_cache_layout_name(c.layout)) + "_" + std::string(dtype_name(c.dtype)) + "_" +
         std::string(kv_cache_dtype_name(c.kv)) + (c.per_head ? "_per_head" : "") + "_block_" +
         std::to_string(c.block_size);
}
void PrintTo(const WriteCase& c, std::ostream* os) { *os << write_case_name(c); }
class CacheWrite : public ::testing::TestWithParam<WriteCase> {};

TEST_P(CacheWrite, BitIdenticalToHostEncoder) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const WriteCase p = GetParam();
  CaseSpec s;
  s.name = "cache_write";
  s.seed = 99;
  s.num_heads = 12;
  s.num_kv_heads = 3;
  s.head_size = 80;
  s.block_size = p.block_size;
  s.dtype = p.dtype;
  s.kv_cache_dtype = p.kv;
  s.kv_scale_per_head = p.per_head;
  s.seq_lens = {5, 300, 70, 1, 33};
  s.query_lens = {5, 20, 1, 1, 0};
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(s, p.layout);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  // Padding tokens: the write must skip them and leave those cache slots as they were (NaN).
  int64_t* slots = batch->slot_mapping.data<int64_t>();
  slots[2] = -1;
  slots[10] = -1;
  StatusOr<std::unique_ptr<testing::DeviceBatch>> dev = testing::upload_batch(*batch, 0);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  StatusOr<std::unique_ptr<AttentionImpl>> impl =
      find_backend("FLASH_ATTN")->make_impl(impl_params_for(*batch));
  ASSERT_TRUE(impl.ok()) << impl.status().to_string();
  const Status st = (*impl)->do_kv_cache_update((*dev)->key(), (*dev)->value(), (*dev)->kv_cache(),
                                                (*dev)->metadata().slot_mapping, (*dev)->scales());
  ASSERT_TRUE(st.ok()) << st.to_string();
  testing::HostTensor out, lse;
  KVCacheAllocation gpu_cache;
  ASSERT_TRUE((*dev)->download(out, lse, gpu_cache).ok());
  const KVCacheAllocation host_cache = host_cache_after_write(*batch);
  ASSERT_EQ(gpu_cache.nbytes(), host_cache.nbytes());
  const auto* a = static_cast<const uint8_t*>(gpu_cache.view().data());
  const auto* b = static_cast<const uint8_t*>(host_cache.view().data());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < gpu_cache.nbytes(); ++i) {
    if (a[i] != b[i] && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0) << "first differing byte " << first;
  // The write did something: the cache differs from the one uploaded.
  EXPECT_NE(std::memcmp(a, batch->kv_cache.view().data(), static_cast<size_t>(gpu_cache.nbytes())), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CacheWrite,
    ::testing::Values(WriteCase{KVCacheLayout::kNHD, DType::kBF16, KVCacheDType::kAuto, false, 16},
                      WriteCase{KVCacheLayout::kHND, DType::kBF16, KVCacheDType::kAuto, false, 16},
                      WriteCase{KVCacheLayout::kNHD, DType::kF16, KVCacheDType::kAuto, false, 64},
                      WriteCase{KVCacheLayout::kHND, DType::kF16, KVCacheDType::kAuto, false, 32},
                      WriteCase{KVCacheLayout::kNHD, DType::kBF16, KVCacheDType::kFP8E4M3, false, 16},
                      WriteCase{KVCacheLayout::kHND, DType::kBF16, KVCacheDType::kFP8E4M3, true, 16},
                      WriteCase{KVCacheLayout::kNHD, DType::kF16, KVCacheDType::kFP8E5M2, true, 256},
                      WriteCase{KVCacheLayout::kHND, DType::kF16, KVCacheDType::kFP8E5M2, false, 64}),
    [](const ::testing::TestParamInfo<WriteCase>& info) { return write_case_name(info.param); });

// Floats that exercise every branch of the FP8 encoders: zeros, subnormals of f32 and of the
// format, exact ties between neighbours, the saturation edge, infinities, NaN, and a sweep of bit
// patterns across the whole float range.
std::vector<float> encoder_inputs() {
  std::vector<float> v = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), 1e-30f, 1e-10f,
                          448.0f, 449.0f, 464.0f, 465.0f, 480.0f, 1e6f, 57344.0f, 61440.0f, 61441.0f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max()};
  // Ties and near-ties around every FP8 value of both formats: k * 2^e / 16 for small k.
  for (int e = -20; e <= 16; ++e) {
    for (int k = 0; k < 64; ++k) {
      const float x = std::ldexp(static_cast<float>(k) + 0.5f, e - 4);
      v.push_back(x);
      v.push_back(std::nextafter(x, 0.0f));
      v.push_back(std::nextafter(x, 1e30f));
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  return v;
}

void check_encoder(DType fp8, float scale) {
  constexpr int kD = 128, kBlock = 16;
  std::vector<float> values = encoder_inputs();
  const int64_t tokens = ((static_cast<int64_t>(values.size()) + kD * kBlock - 1) / (kD * kBlock)) * kBlock;
  values.resize(static_cast<size_t>(tokens * kD), 1.0f);
  std::vector<float> negated(values.size());
  for (size_t i = 0; i < values.size(); ++i) negated[i] = -values[i];
  std::vector<int64_t> slots(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) slots[t] = (t * 7919) % tokens;  // shuffled, one each

  const int64_t cache_bytes = tokens * 2 * kD;
  StatusOr<DeviceBuffer> k = DeviceBuffer::allocate(0, values.size() * 4);
  StatusOr<DeviceBuffer> v = DeviceBuffer::allocate(0, values.size() * 4);
  StatusOr<DeviceBuffer> cache = DeviceBuffer::allocate(0, cache_bytes);
  StatusOr<DeviceBuffer> slot_buf = DeviceBuffer::allocate(0, slots.size() * 8);
  StatusOr<DeviceBuffer> scale_buf = DeviceBuffer::allocate(0, 4);
  ASSERT_TRUE(k.ok() && v.ok() && cache.ok() && slot_buf.ok() && scale_buf.ok());
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(k->data(), values.data(), values.size() * 4, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(v->data(), negated.data(), values.size() * 4, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(slot_buf->data(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(scale_buf->data(), &scale, 4, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(cache->data(), 0, cache_bytes));

  const Device gpu = Device::cuda(0);
  const TensorView key(k->data(), DType::kF32, gpu, {tokens, 1, kD});
  const TensorView value(v->data(), DType::kF32, gpu, {tokens, 1, kD});
  const TensorView slot_view(slot_buf->data(), DType::kI64, gpu, {tokens});
  const TensorView scale_view(scale_buf->data(), DType::kF32, gpu, {1});
  const TensorView cache_view(cache->data(), fp8, gpu, {tokens / kBlock, 2, kBlock, 1, kD});
  const Status st = kernels::launch_cache_write(key, value, cache_view, slot_view, scale_view,
                                                scale_view, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<uint8_t> got(static_cast<size_t>(cache_bytes));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(got.data(), cache->data(), cache_bytes, cudaMemcpyDeviceToHost));

  int64_t mismatches = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = slots[t];
    const int64_t base = (slot / kBlock) * 2 * kBlock * kD + (slot % kBlock) * kD;
    for (int plane = 0; plane < 2; ++plane) {
      for (int e = 0; e < kD; ++e) {
        const float x = (plane == 0 ? values : negated)[t * kD + e] / scale;
        const uint8_t want = fp8 == DType::kFP8E4M3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
        const uint8_t have = got[base + plane * kBlock * kD + e];
        if (want != have && mismatches++ < 5) {
          ADD_FAILURE() << dtype_name(fp8) << " scale " << scale << ": x / scale = " << x << " (bits 0x"
                        << std::hex << std::bit_cast<uint32_t>(x) << ") encoded 0x" << int{have}
                        << ", host 0x" << int{want} << std::dec;
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(CacheWriteFp8, EncoderMatchesHostOnEveryKindOfFloat) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (DType fp8 : {DType::kFP8E4M3, DType::kFP8E5M2}) {
    for (float scale : {1.0f, 0.37f, 3.0e-3f}) check_encoder(fp8, scale);
  }
}

TEST(CacheWriteArgs, RejectsMismatchedShapes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  StatusOr<DeviceBuffer> buf = DeviceBuffer::allocate(0, 1 << 20);
  ASSERT_TRUE(buf.ok());
  const Device gpu = Device::cuda(0);
  const TensorView cache(buf->data(), DType::kBF16, gpu, {4, 2, 16, 2, 64});
  const TensorView key(buf->data(), DType::kBF16, gpu, {8, 3, 64});  // 3 heads, cache has 2
  const TensorView slots(buf->data(), DType::kI64, gpu, {8});
  const Status st = kernels::launch_cache_write(key, key, cache, slots, {}, {}, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key"), std::string::npos) << st.message();
  const TensorView short_key(buf->data(), DType::kBF16, gpu, {4, 2, 64});  // fewer rows than slots
  EXPECT_FALSE(
      kernels::launch_cache_write(short_key, short_key, cache, slots, {}, {}, nullptr).ok());
  const TensorView host_cache(nullptr, DType::kBF16, Device::cpu(), {4, 2, 16, 2, 64});
  EXPECT_FALSE(kernels::launch_cache_write(key, key, host_cache, slots, {}, {}, nullptr).ok());
}

}  // namespace
}  // namespace pagedattn::test
