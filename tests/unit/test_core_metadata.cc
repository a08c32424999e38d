// CommonAttentionMetadata::validate: a consistent batch passes; each inconsistency fails with a
// message naming the field.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "pagedattn/metadata.h"
#include "test_core_batch.h"

namespace pagedattn {
namespace {

using core_test::make_test_batch;
using core_test::TestBatch;

// Odd sizes: a decode, a chunked prefill with context, a fresh prefill, a length-1 sequence.
TestBatch good_batch() {
  return make_test_batch({1, 9, 21, 1}, {37, 40, 21, 1}, 16);
}

void expect_error(const TestBatch& b, const std::string& needle) {
  const Status s = b.meta.validate(b.block_size, b.num_blocks);
  EXPECT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(MetadataValidate, ConsistentBatchPasses) {
  TestBatch b = good_batch();
  EXPECT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok())
      << b.meta.validate(b.block_size, b.num_blocks).to_string();
}

TEST(MetadataValidate, PaddedBatchPasses) {
  TestBatch b = make_test_batch({1, 1, 0}, {5, 17, 3}, 16, /*padded_tokens=*/8);
  EXPECT_EQ(b.meta.num_actual_tokens, 8);
  EXPECT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok());
}

TEST(MetadataValidate, EmptyBatchPasses) {
  TestBatch b = make_test_batch({}, {}, 16);
  EXPECT_TRUE(b.meta.validate(b.block_size, 4).ok());
}

TEST(MetadataValidate, CacheGeometry) {
  TestBatch b = good_batch();
  EXPECT_NE(b.meta.validate(0, b.num_blocks).message().find("block_size"), std::string::npos);
  EXPECT_NE(b.meta.validate(16, 0).message().find("num_blocks"), std::string::npos);
}

TEST(MetadataValidate, NegativeScalars) {
  TestBatch b = good_batch();
  b.meta.num_actual_tokens = -1;
  expect_error(b, "num_actual_tokens");
  b = good_batch();
  b.meta.max_query_len = -2;
  expect_error(b, "max_query_len");
  b = good_batch();
  b.meta.max_seq_len = -2;
  expect_error(b, "max_seq_len");
  b = good_batch();
  b.meta.num_reqs = -1;
  expect_error(b, "num_reqs");
}

TEST(MetadataValidate, QueryStartLoc) {
  TestBatch b = good_batch();
  b.query_start_loc[0] = 1;
  expect_error(b, "query_start_loc_cpu[0] must be 0");
  b = good_batch();
  std::swap(b.query_start_loc[1], b.query_start_loc[2]);
  expect_error(b, "non-decreasing");
  b = good_batch();
  b.meta.num_actual_tokens -= 1;
  expect_error(b, "exceeds num_actual_tokens");
}

TEST(MetadataValidate, HostAndDeviceCopiesAgree) {
  TestBatch b = good_batch();
  std::vector<int32_t> other = b.query_start_loc;
  other[2] += 1;
  b.meta.query_start_loc =
      TensorView(other.data(), DType::kI32, Device::cpu(), {static_cast<int64_t>(other.size())});
  expect_error(b, "query_start_loc[2]");
  b = good_batch();
  std::vector<int32_t> seqs = b.seq_lens;
  seqs[1] += 1;
  b.meta.seq_lens = TensorView(seqs.data(), DType::kI32, Device::cpu(), {4});
  expect_error(b, "seq_lens[1]");
}

TEST(MetadataValidate, Lengths) {
  TestBatch b = good_batch();
  b.seq_lens[1] = 8;  // query_len 9
  expect_error(b, "exceeds seq_lens_cpu[1]");
  b = good_batch();
  b.seq_lens[3] = -1;
  expect_error(b, "seq_lens_cpu[3] = -1 is negative");
  b = good_batch();
  b.meta.max_query_len = 20;
  expect_error(b, "max_query_len = 20");
  b = good_batch();
  b.meta.max_seq_len = 39;
  expect_error(b, "max_seq_len = 39");
  b = good_batch();
  b.meta.max_seq_len = 4096;  // an upper bound is allowed
  EXPECT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok());
}

TEST(MetadataValidate, BlockTable) {
  TestBatch b = good_batch();
  b.meta.block_table_tensor = TensorView(b.block_table.data(), DType::kI32, Device::cpu(), {4, 2});
  expect_error(b, "block_table_tensor is too narrow");
  b = good_batch();
  b.block_table[1 * b.width + 2] = static_cast<int32_t>(b.num_blocks);
  expect_error(b, "block_table_tensor[1][2]");
  b = good_batch();
  b.block_table[0] = -3;
  expect_error(b, "block_table_tensor[0][0] = -3");
  b = good_batch();
  b.meta.block_table_tensor =
      TensorView(b.block_table.data(), DType::kI32, Device::cpu(), {2, b.width});
  expect_error(b, "rows");
}

TEST(MetadataValidate, SlotMapping) {
  TestBatch b = good_batch();
  b.slot_mapping[3] = b.num_blocks * b.block_size;
  expect_error(b, "slot_mapping[3]");
  b = good_batch();
  b.slot_mapping[0] = -5;
  expect_error(b, "slot_mapping[0] = -5");
  b = good_batch();
  std::swap(b.slot_mapping[1], b.slot_mapping[2]);
  expect_error(b, "does not match request 1");
  b = good_batch();
  b.slot_mapping[4] = -1;  // a real token must be written: its keys are read by later steps
  expect_error(b, "slot_mapping[4] = -1 is outside the cache (allowed: [0, ");
  b = good_batch();
  b.meta.slot_mapping = TensorView(b.slot_mapping.data(), DType::kI64, Device::cpu(), {5});
  expect_error(b, "slot_mapping has 5 entries");
}

TEST(MetadataValidate, DtypesRanksShapesAndPlacement) {
  TestBatch b = good_batch();
  b.meta.slot_mapping = TensorView(b.slot_mapping.data(), DType::kI32, Device::cpu(),
                                   {static_cast<int64_t>(b.slot_mapping.size())});
  expect_error(b, "slot_mapping has dtype i32");
  b = good_batch();
  b.meta.seq_lens_cpu = TensorView(b.seq_lens.data(), DType::kI32, Device::cpu(), {2, 2});
  expect_error(b, "seq_lens_cpu must have rank 1");
  b = good_batch();
  b.meta.query_start_loc_cpu =
      TensorView(b.query_start_loc.data(), DType::kI32, Device::cpu(), {4});
  expect_error(b, "query_start_loc_cpu must have 5 entries");
  b = good_batch();
  b.meta.seq_lens_cpu = TensorView(b.seq_lens.data(), DType::kI32, Device::cuda(0), {4});
  expect_error(b, "seq_lens_cpu must be on the host");
  b = good_batch();
  b.meta.block_table_tensor =
      TensorView(b.block_table.data(), DType::kI64, Device::cpu(), {4, b.width / 2});
  expect_error(b, "block_table_tensor has dtype i64");
  b = good_batch();
  b.meta.query_start_loc = TensorView();
  expect_error(b, "query_start_loc is missing");
  b = good_batch();
  b.meta.is_prefilling = TensorView(b.is_prefilling.data(), DType::kU8, Device::cpu(), {3});
  expect_error(b, "is_prefilling must have 4 entries");
  b = good_batch();
  b.meta.is_prefilling = TensorView(b.is_prefilling.data(), DType::kU8, Device::cuda(0), {4});
  expect_error(b, "is_prefilling must be on the host");
  b = good_batch();
  b.meta.query_start_loc_cpu = TensorView(nullptr, DType::kI32, Device::cpu(), {5});
  expect_error(b, "query_start_loc_cpu has no data");
  b = good_batch();
  b.meta.seq_lens = TensorView(b.seq_lens.data(), DType::kI64, Device::cpu(), {2});
  expect_error(b, "seq_lens has dtype i64");
  b = good_batch();
  b.meta.block_table_tensor = TensorView(b.block_table.data(), DType::kI32, Device::cpu(),
                                         {static_cast<int64_t>(b.block_table.size())});
  expect_error(b, "block_table_tensor must have rank 2");
}

TEST(MetadataValidate, DeviceResidentContentsAreNotRead) {
  // Device fields are only shape-checked: a bogus pointer on "cuda" must not be dereferenced.
  TestBatch b = good_batch();
  auto* bogus = reinterpret_cast<int32_t*>(uintptr_t{0x10});
  b.meta.block_table_tensor = TensorView(bogus, DType::kI32, Device::cuda(0), {4, b.width});
  b.meta.slot_mapping = TensorView(bogus, DType::kI64, Device::cuda(0),
                                   {static_cast<int64_t>(b.slot_mapping.size())});
  b.meta.query_start_loc = TensorView(bogus, DType::kI32, Device::cuda(0), {5});
  b.meta.seq_lens = TensorView(bogus, DType::kI32, Device::cuda(0), {4});
  EXPECT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok());
}

TEST(MetadataValidate, PaddingTokensHaveNoSlot) {
  TestBatch b = make_test_batch({1, 1, 0}, {5, 17, 3}, 16, /*padded_tokens=*/8);
  b.slot_mapping[5] = b.slot_mapping[0] + 1;  // a live slot on a CUDA-graph padding token
  expect_error(
      b, "slot_mapping[5] = " + std::to_string(b.slot_mapping[0] + 1) + " is a padding token");
  // Entries past num_actual_tokens (a persistent buffer's tail) are -1 or inside the cache.
  b = make_test_batch({1, 1, 0}, {5, 17, 3}, 16, /*padded_tokens=*/8);
  b.meta.num_actual_tokens = 4;
  b.slot_mapping[6] = 3;
  EXPECT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok());
}

TEST(MetadataValidate, HostViewsNeedData) {
  TestBatch b = good_batch();
  b.meta.block_table_tensor = TensorView(nullptr, DType::kI32, Device::cpu(), {4, b.width});
  expect_error(b, "block_table_tensor has no data");
  b = good_batch();
  b.meta.slot_mapping = TensorView(nullptr, DType::kI64, Device::cpu(),
                                   {static_cast<int64_t>(b.slot_mapping.size())});
  expect_error(b, "slot_mapping has no data");
  b = good_batch();
  b.meta.seq_lens = TensorView(nullptr, DType::kI32, Device::cuda(0), {4});
  expect_error(b, "seq_lens has no data");
  b = good_batch();
  b.meta.query_start_loc = TensorView(nullptr, DType::kI32, Device::cpu(), {5});
  expect_error(b, "query_start_loc has no data");
}

// A request may name one block at two positions (vLLM's random test tables do); ids outside the
// cache are refused wherever they stand.
TEST(MetadataValidate, BlockIdTwiceInOneRequestIsRead) {
  TestBatch b = good_batch();  // request 0: 37 keys in 3 blocks, its one new token in the third
  b.block_table[1] = b.block_table[0];
  b.refresh();
  const Status repeated = b.meta.validate(b.block_size, b.num_blocks);
  EXPECT_TRUE(repeated.ok()) << repeated.to_string();
  b.block_table[1] = static_cast<int32_t>(b.num_blocks);
  b.refresh();
  expect_error(b, "block_table_tensor[0][1] = " + std::to_string(b.num_blocks) +
                      " is outside the cache's blocks");
}

// Two columns the step writes new tokens into may not name one block: their tokens would share
// slots. Request 2 (tokens 10-30) writes 21 tokens over its 2 blocks; its slots follow the table.
TEST(MetadataValidate, BlockWrittenAtTwoColumnsIsRefused) {
  TestBatch b = good_batch();
  const int32_t first = b.block_table[2 * b.width];
  b.block_table[2 * b.width + 1] = first;
  for (int i = 16; i < 21; ++i) b.slot_mapping[10 + i] = int64_t{first} * 16 + i % 16;
  b.refresh();
  expect_error(b, "block_table_tensor[2][1] = " + std::to_string(first) +
                      " repeats column 0: this step writes new tokens into both");
}

TEST(MetadataValidate, SizesDoNotOverflow) {
  TestBatch b = good_batch();
  const Status s = b.meta.validate(b.block_size, std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("overflows int64"), std::string::npos) << s.message();
  b = good_batch();
  b.meta.num_reqs = std::numeric_limits<int>::max();
  expect_error(b, "must have 2147483648 entries");
}

// Three requests whose first two blocks (32 tokens) are the same physical blocks.
TestBatch prefix_batch() {
  TestBatch b = make_test_batch({1, 3, 1}, {40, 45, 37}, 16);
  for (int r = 1; r < 3; ++r) {
    for (int c = 0; c < 2; ++c) b.block_table[r * b.width + c] = b.block_table[c];
  }
  b.refresh();
  return b;
}

TEST(MetadataValidate, CommonPrefix) {
  TestBatch b = prefix_batch();
  ASSERT_TRUE(b.meta.validate(b.block_size, b.num_blocks).ok());
  EXPECT_TRUE(b.meta.validate_common_prefix(0, 16).ok());
  EXPECT_TRUE(b.meta.validate_common_prefix(16, 16).ok());
  EXPECT_TRUE(b.meta.validate_common_prefix(32, 16).ok());
  const auto message = [&](int len) { return b.meta.validate_common_prefix(len, 16).message(); };
  EXPECT_NE(message(24).find("multiple of block_size = 16"), std::string::npos);
  EXPECT_NE(message(-16).find("non-negative"), std::string::npos);
  b.block_table[2 * b.width + 1] ^= 1;  // request 2 now holds another block at column 1
  EXPECT_NE(message(32).find("block_table_tensor[2][1]"), std::string::npos) << message(32);
  EXPECT_NE(message(32).find("differs from request 0's block"), std::string::npos);
  // Longer than a request's cached context (request 0: 40 tokens, 1 new).
  b = prefix_batch();
  EXPECT_NE(message(48).find("exceeds request 0's context length 39"), std::string::npos)
      << message(48);
  TestBatch empty = make_test_batch({}, {}, 16);
  EXPECT_NE(empty.meta.validate_common_prefix(16, 16).message().find("no requests"),
            std::string::npos);
}

}  // namespace
}  // namespace pagedattn
