// The .npy writer: a header NumPy accepts (magic, version 1.0, dict, 64-byte alignment) and the
// raw little-endian data after it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "testing/npy.h"

namespace pagedattn::testing {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Npy, HeaderFormat) {
  for (auto shape :
       {std::vector<int64_t>{}, std::vector<int64_t>{3}, std::vector<int64_t>{2, 3, 4}}) {
    const std::string h = npy_header("<f4", shape);
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ(h[6], 1);
    EXPECT_EQ(h[7], 0);
    EXPECT_EQ(static_cast<size_t>(static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8)),
              h.size() - 10);
    EXPECT_EQ(h.back(), '\n');
  }
  EXPECT_NE(npy_header("<f4", {3}).find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(
      npy_header("<i8", {2, 3}).find("'descr': '<i8', 'fortran_order': False, 'shape': (2, 3)"),
      std::string::npos);
}

TEST(Npy, WritesDataAfterHeader) {
  const std::string path = ::testing::TempDir() + "/pagedattn_npy_test.npy";
  std::vector<int32_t> values = {1, -2, 3, 400000, 5, 6};
  TensorView view(values.data(), DType::kI32, Device::cpu(), {2, 3});
  ASSERT_TRUE(write_npy(path, view).ok());
  const std::string file = read_all(path);
  const std::string header = npy_header("<i4", {2, 3});
  ASSERT_EQ(file.size(), header.size() + sizeof(int32_t) * values.size());
  EXPECT_EQ(file.substr(0, header.size()), header);
  EXPECT_EQ(std::memcmp(file.data() + header.size(), values.data(), 24), 0);

  std::vector<float> f = {0.5f, -1.25f};
  ASSERT_TRUE(write_npy_f32(path, {2}, f).ok());
  EXPECT_EQ(read_all(path).size(), npy_header("<f4", {2}).size() + 8);
  EXPECT_FALSE(write_npy_f32(path, {3}, f).ok());  // shape and data disagree
  std::remove(path.c_str());
}

TEST(Npy, RejectsWhatItCannotWrite) {
  std::vector<uint16_t> half(4);
  TensorView bf16(half.data(), DType::kBF16, Device::cpu(), {4});
  EXPECT_FALSE(write_npy("/tmp/x.npy", bf16).ok());
  std::vector<float> f(6);
  const int64_t shape[] = {2, 3}, strides[] = {1, 2};
  TensorView strided(f.data(), DType::kF32, Device::cpu(), shape, strides);
  EXPECT_FALSE(write_npy("/tmp/x.npy", strided).ok());
}

}  // namespace
}  // namespace pagedattn::testing
