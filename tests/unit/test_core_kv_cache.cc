// KV-cache geometry: shapes, stride orders, strides per layout, bytes, the layout setting, and the
// owning allocation (host; device where CUDA and a GPU exist).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "pagedattn/device_info.h"
#include "pagedattn/kv_cache.h"

namespace pagedattn {
namespace {

TEST(KVCacheShape, LogicalShapeAndErrors) {
  auto shape = get_kv_cache_shape(37, 16, 8, 128);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (KVCacheShape{37, 2, 16, 8, 128}));
  EXPECT_EQ(*get_kv_cache_shape(5, 24, 1, 80, KVCacheDType::kFP8E5M2),
            (KVCacheShape{5, 2, 24, 1, 80}));
  EXPECT_EQ(get_kv_cache_shape(0, 16, 8, 128).status().message(),
            "num_blocks must be positive, got 0");
  EXPECT_EQ(get_kv_cache_shape(1, -16, 8, 128).status().message(),
            "block_size must be positive, got -16");
  EXPECT_NE(get_kv_cache_shape(1, 16, 0, 128).status().message().find("num_kv_heads"),
            std::string::npos);
  EXPECT_NE(get_kv_cache_shape(1, 16, 8, 0).status().message().find("head_size"),
            std::string::npos);
}

TEST(KVCacheShape, StrideOrders) {
  EXPECT_EQ(get_kv_cache_stride_order(KVCacheLayout::kNHD), (KVCacheStrideOrder{0, 1, 2, 3, 4}));
  EXPECT_EQ(get_kv_cache_stride_order(KVCacheLayout::kHND), (KVCacheStrideOrder{0, 1, 3, 2, 4}));
}

TEST(KVCacheShape, StridesPerLayout) {
  const KVCacheShape shape{3, 2, 16, 4, 8};
  EXPECT_EQ(kv_cache_strides(shape, KVCacheLayout::kNHD),
            (std::array<int64_t, 5>{1024, 512, 32, 8, 1}));
  // HND: physical (N, 2, H, bs, D).
  EXPECT_EQ(kv_cache_strides(shape, KVCacheLayout::kHND),
            (std::array<int64_t, 5>{1024, 512, 8, 128, 1}));
}

TEST(KVCacheShape, BytesPerBlock) {
  EXPECT_EQ(*kv_cache_bytes_per_block(16, 8, 128, DType::kBF16), 2 * 16 * 8 * 128 * 2);
  EXPECT_EQ(*kv_cache_bytes_per_block(16, 8, 128, DType::kFP8E4M3), 2 * 16 * 8 * 128);
  EXPECT_EQ(*kv_cache_bytes_per_block(1, 1, 32, DType::kF32), 256);
}

TEST(KVCacheLayoutSetting, DefaultAndOverride) {
  EXPECT_EQ(get_kv_cache_layout(), KVCacheLayout::kNHD);
  set_kv_cache_layout(KVCacheLayout::kHND);
  EXPECT_EQ(get_kv_cache_layout(), KVCacheLayout::kHND);
  set_kv_cache_layout(KVCacheLayout::kNHD);
  EXPECT_EQ(get_kv_cache_layout(), KVCacheLayout::kNHD);
}

// Every logical element maps to a distinct in-bounds offset, and the physical order is the
// layout's.
void check_host_allocation(KVCacheLayout layout) {
  const KVCacheShape shape{3, 2, 5, 3, 32};
  auto alloc = KVCacheAllocation::allocate(shape, DType::kF16, layout, Device::cpu());
  ASSERT_TRUE(alloc.ok()) << alloc.status().to_string();
  const TensorView& v = alloc->view();
  EXPECT_EQ(alloc->layout(), layout);
  EXPECT_EQ(alloc->nbytes(), 3 * 2 * 5 * 3 * 32 * 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 256, 0u);
  for (int d = 0; d < 5; ++d) EXPECT_EQ(v.size(d), shape[d]);
  const auto strides = kv_cache_strides(shape, layout);
  for (int d = 0; d < 5; ++d) EXPECT_EQ(v.stride(d), strides[d]);
  EXPECT_EQ(v.is_contiguous(), layout == KVCacheLayout::kNHD);
  auto* data = v.data_as<uint16_t>();
  std::set<int64_t> offsets;
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t d = 0; d < 32; ++d) {
            const int64_t off = n * v.stride(0) + kv * v.stride(1) + t * v.stride(2) +
                                h * v.stride(3) + d * v.stride(4);
            ASSERT_GE(off, 0);
            ASSERT_LT(off, v.numel());
            offsets.insert(off);
            data[off] = static_cast<uint16_t>(off * 3 + 1);  // writable everywhere
          }
  EXPECT_EQ(static_cast<int64_t>(offsets.size()), v.numel());
  // In HND the tokens of one head are adjacent, so the head stride exceeds the token stride.
  if (layout == KVCacheLayout::kHND) {
    EXPECT_GT(v.stride(3), v.stride(2));
  }
}

TEST(KVCacheAllocation, HostNHD) {
  check_host_allocation(KVCacheLayout::kNHD);
}
TEST(KVCacheAllocation, HostHND) {
  check_host_allocation(KVCacheLayout::kHND);
}

TEST(KVCacheAllocation, MoveAndErrors) {
  auto a = KVCacheAllocation::allocate({2, 2, 16, 1, 64}, DType::kFP8E4M3, KVCacheLayout::kNHD,
                                       Device::cpu());
  ASSERT_TRUE(a.ok());
  void* memory = a->view().data();
  KVCacheAllocation moved = std::move(a).value();
  EXPECT_EQ(moved.view().data(), memory);
  EXPECT_EQ(moved.nbytes(), 2 * 2 * 16 * 64);
  KVCacheAllocation target;
  EXPECT_FALSE(target.view().defined());
  target = std::move(moved);
  EXPECT_EQ(target.view().data(), memory);
  EXPECT_FALSE(moved.view().defined());  // NOLINT: checking the moved-from state on purpose

  EXPECT_FALSE(KVCacheAllocation::allocate({0, 2, 16, 1, 64}, DType::kF16, KVCacheLayout::kNHD,
                                           Device::cpu())
                   .ok());
  auto three = KVCacheAllocation::allocate({1, 3, 16, 1, 64}, DType::kF16, KVCacheLayout::kNHD,
                                           Device::cpu());
  EXPECT_NE(three.status().message().find("dim 1 must be 2"), std::string::npos);
  auto ints = KVCacheAllocation::allocate({1, 2, 16, 1, 64}, DType::kI32, KVCacheLayout::kNHD,
                                          Device::cpu());
  EXPECT_NE(ints.status().message().find("i32"), std::string::npos);
  // 8 PiB: more than the address space, so the host allocation must fail cleanly.
  auto huge = KVCacheAllocation::allocate({int64_t{1} << 20, 2, 1 << 16, 64, 512}, DType::kF16,
                                          KVCacheLayout::kNHD, Device::cpu());
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(huge.status().message().find("host allocation of 9007199254740992 bytes failed"),
            std::string::npos)
      << huge.status().message();
}

TEST(KVCacheAllocation, HostCachesAreAlignedForHugePages) {
  // 4 MiB: on 2 MiB boundaries (transparent huge pages); 8 KiB: on 256 bytes.
  auto large = KVCacheAllocation::allocate({128, 2, 16, 8, 64}, DType::kF16, KVCacheLayout::kNHD,
                                           Device::cpu());
  ASSERT_TRUE(large.ok()) << large.status().message();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large->view().data()) % (uintptr_t{2} << 20), 0u);
  auto small = KVCacheAllocation::allocate({4, 2, 16, 1, 64}, DType::kF16, KVCacheLayout::kNHD,
                                           Device::cpu());
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->view().data()) % 256, 0u);
}

TEST(KVCacheAllocation, SizesAreCheckedBeforeAllocating) {
  // 2^51 + 1 blocks of 4 KiB: the byte count overflows int64 (it used to wrap to 4 KiB).
  auto wrapped = KVCacheAllocation::allocate({(int64_t{1} << 51) + 1, 2, 16, 1, 64}, DType::kF16,
                                             KVCacheLayout::kNHD, Device::cpu());
  ASSERT_FALSE(wrapped.ok());
  EXPECT_EQ(wrapped.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(wrapped.status().message().find("overflows int64"), std::string::npos)
      << wrapped.status().message();
  // A dim past int is refused, not narrowed (2^32 + 16 is not 16).
  auto narrowed = KVCacheAllocation::allocate({1, 2, (int64_t{1} << 32) + 16, 1, 64}, DType::kF16,
                                              KVCacheLayout::kNHD, Device::cpu());
  ASSERT_FALSE(narrowed.ok());
  EXPECT_NE(narrowed.status().message().find("dim 2 (block_size) = 4294967312"), std::string::npos)
      << narrowed.status().message();
  auto heads = KVCacheAllocation::allocate({1, 2, 16, -1, 64}, DType::kF16, KVCacheLayout::kNHD,
                                           Device::cpu());
  EXPECT_NE(heads.status().message().find("num_kv_heads"), std::string::npos);
}

TEST(KVCacheShape, OverflowIsAnError) {
  auto shape = get_kv_cache_shape(int64_t{1} << 62, 16, 8, 128);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("overflows int64"), std::string::npos);
  const int big = std::numeric_limits<int>::max();
  auto bytes = kv_cache_bytes_per_block(big, big, big, DType::kF32);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("overflow int64"), std::string::npos);
  EXPECT_FALSE(kv_cache_bytes_per_block(0, 8, 128, DType::kF16).ok());
}

TEST(KVCacheAllocation, Device) {
  auto a = KVCacheAllocation::allocate({4, 2, 16, 2, 64}, DType::kBF16, KVCacheLayout::kHND,
                                       Device::cuda(0));
  if (!built_with_cuda()) {
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(a.status().message().find("no CUDA support"), std::string::npos);
  } else if (cuda_devices().empty()) {
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kCudaError);
  } else {
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_TRUE(a->view().device().is_cuda());
    EXPECT_EQ(a->view().stride(3), 16 * 64);
  }
}

}  // namespace
}  // namespace pagedattn
