// TensorView construction, shape helpers and the expect_* argument checks.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "pagedattn/tensor.h"

namespace pagedattn {
namespace {

TEST(TensorView, ContiguousConstruction) {
  std::vector<float> data(2 * 3 * 5, 1.5f);
  TensorView t(data.data(), DType::kF32, Device::cpu(), {2, 3, 5});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.nbytes(), 120);
  EXPECT_EQ(t.stride(0), 15);
  EXPECT_EQ(t.stride(1), 5);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.describe(), "f32[2, 3, 5] cpu");
  EXPECT_EQ(t.data_as<float>(), data.data());
}

TEST(TensorView, UndefinedAndTooManyDims) {
  TensorView empty;
  EXPECT_FALSE(empty.defined());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.describe(), "undefined");
  int x = 0;
  const std::array<int64_t, 7> shape{1, 1, 1, 1, 1, 1, 1};
  TensorView too_deep(&x, DType::kI32, Device::cpu(), shape);
  EXPECT_FALSE(too_deep.defined());
  const std::array<int64_t, 2> s2{2, 2};
  const std::array<int64_t, 1> st1{1};
  TensorView mismatched(&x, DType::kI32, Device::cpu(), s2, st1);
  EXPECT_FALSE(mismatched.defined());
}

TEST(TensorView, PermuteAndContiguity) {
  std::vector<uint16_t> data(4 * 6 * 8);
  TensorView t(data.data(), DType::kBF16, Device::cuda(1), {4, 6, 8});
  const std::array<int, 3> order{1, 0, 2};
  auto p = t.permute(order);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->size(0), 6);
  EXPECT_EQ(p->size(1), 4);
  EXPECT_EQ(p->stride(0), 8);
  EXPECT_EQ(p->stride(1), 48);
  EXPECT_FALSE(p->is_contiguous());
  EXPECT_EQ(p->describe(), "bf16[6, 4, 8] strides [8, 48, 1] cuda:1");
  auto back = p->permute(order);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->is_contiguous());
  const std::array<int, 3> repeated{0, 0, 2};
  EXPECT_FALSE(t.permute(repeated).ok());
  const std::array<int, 2> short_order{0, 1};
  EXPECT_FALSE(t.permute(short_order).ok());
  const std::array<int, 3> out_of_range{0, 1, 3};
  EXPECT_FALSE(t.permute(out_of_range).ok());
  // Size-1 dims do not break contiguity whatever their stride.
  const std::array<int64_t, 2> shape{1, 4};
  const std::array<int64_t, 2> strides{99, 1};
  EXPECT_TRUE(TensorView(data.data(), DType::kBF16, Device::cpu(), shape, strides).is_contiguous());
}

TEST(TensorView, Slice0) {
  std::vector<int32_t> data(10 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i * 7 + 1);
  TensorView t(data.data(), DType::kI32, Device::cpu(), {10, 3});
  auto s = t.slice0(4, 5);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(0), 5);
  EXPECT_EQ(s->data_as<int32_t>()[0], data[12]);
  EXPECT_EQ(s->numel(), 15);
  EXPECT_TRUE(t.slice0(10, 0).ok());
  auto past = t.slice0(8, 3);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(t.slice0(-1, 2).ok());
  EXPECT_FALSE(TensorView().slice0(0, 0).ok());
}

TEST(TensorView, ExpectChecks) {
  std::vector<float> data(12);
  TensorView t(data.data(), DType::kF32, Device::cpu(), {3, 4});
  EXPECT_TRUE(expect_rank(t, "query", 2).ok());
  Status r = expect_rank(t, "query", 3);
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.message(), "query must have rank 3, got f32[3, 4] cpu");
  EXPECT_NE(expect_rank(TensorView(), "lse", 2).message().find("lse is missing"),
            std::string::npos);
  EXPECT_TRUE(expect_dtype(t, "query", {DType::kF16, DType::kF32}).ok());
  EXPECT_EQ(expect_dtype(t, "query", {DType::kF16, DType::kBF16}).message(),
            "query has dtype f32; allowed: f16, bf16");
  EXPECT_TRUE(expect_shape(t, "query", {3, 4}).ok());
  EXPECT_TRUE(expect_shape(t, "query", {-1, 4}).ok());
  EXPECT_EQ(expect_shape(t, "query", {3, 5}).message(),
            "query must have shape [3, 5], got f32[3, 4] cpu");
  EXPECT_EQ(expect_shape(t, "query", {-1, 5}).message(),
            "query must have shape [*, 5], got f32[3, 4] cpu");
  EXPECT_FALSE(expect_shape(t, "query", {3, 4, 1}).ok());
  EXPECT_TRUE(expect_device(t, "query", Device::cpu()).ok());
  EXPECT_EQ(expect_device(t, "query", Device::cuda(0)).message(),
            "query is on cpu; expected cuda:0");
}

TEST(TensorView, ShapesItCannotHoldAreUndefined) {
  int x = 0;
  const std::array<int64_t, 2> negative{4, -1};
  EXPECT_FALSE(TensorView(&x, DType::kI32, Device::cpu(), negative).defined());
  // 2^62 x 4 f32 elements: the element count fits int64, the bytes do not.
  const std::array<int64_t, 2> huge{int64_t{1} << 62, 4};
  TensorView too_big(&x, DType::kF32, Device::cpu(), huge);
  EXPECT_FALSE(too_big.defined());
  EXPECT_EQ(too_big.numel(), 0);
  const std::array<int64_t, 2> strides{4, 1};
  EXPECT_FALSE(TensorView(&x, DType::kF32, Device::cpu(), huge, strides).defined());
  EXPECT_FALSE(expect_rank(too_big, "too_big", 2).ok());
}

TEST(TensorView, Slice0RangeDoesNotOverflow) {
  std::vector<float> data(8);
  TensorView t(data.data(), DType::kF32, Device::cpu(), {8});
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(t.slice0(max, max).ok());
  EXPECT_FALSE(t.slice0(1, max).ok());
  EXPECT_FALSE(t.slice0(9, 0).ok());
  EXPECT_TRUE(t.slice0(8, 0).ok());
  // A caller's stride so large that start * stride overflows is an error, not a wild pointer.
  const std::array<int64_t, 1> shape{4};
  const std::array<int64_t, 1> stride{int64_t{1} << 61};
  TensorView strided(data.data(), DType::kF32, Device::cpu(), shape, stride);
  auto slice = strided.slice0(3, 1);
  ASSERT_FALSE(slice.ok());
  EXPECT_NE(slice.status().message().find("overflows int64"), std::string::npos);
}

}  // namespace
}  // namespace pagedattn
