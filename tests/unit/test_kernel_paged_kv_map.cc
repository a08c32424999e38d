// The paged cache's tensor-map geometry (kernels/paged_kv_map.h), which the v3 prefill, its FP8
// kernel and the decode kernel encode: dimensions in stride order for both layouts, byte strides,
// boxes of one head's tokens.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/paged_kv_map.h"

namespace pagedattn {
namespace {

// [blocks, 2, block, heads, d] with the given token and head strides (elements).
kernels::PagedAttentionParams cache(int block, int heads, int d, bool nhd) {
  kernels::PagedAttentionParams p;
  p.block_size = block;
  p.num_kv_heads = heads;
  p.head_size = d;
  p.cache_token_stride = nhd ? int64_t{heads} * d : d;
  p.cache_head_stride = nhd ? d : int64_t{block} * d;
  p.cache_kv_stride = int64_t{block} * heads * d;
  p.cache_block_stride = 2 * p.cache_kv_stride;
  return p;
}

TEST(PagedKvMap, NhdHasHeadsInsideTokens) {
  const kernels::PagedKvMapShape m =
      kernels::paged_kv_map_shape(cache(16, 8, 128, true), 2, 64, 16);
  EXPECT_EQ(m.token_coord, 2);
  const uint64_t dims[5] = {128, 8, 16, 2, (uint64_t{1} << 31) - 1};
  const uint64_t strides[4] = {128 * 2, 8 * 128 * 2, 16 * 8 * 128 * 2, 2 * 16 * 8 * 128 * 2};
  const uint32_t box[5] = {64, 1, 16, 1, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.dims[i], dims[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m.strides_bytes[i], strides[i]) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.box[i], box[i]) << i;
}

TEST(PagedKvMap, HndHasTokensInsideHeads) {
  // FP8 bytes, the decode kernel's boxes of 128 columns x 16 tokens.
  const kernels::PagedKvMapShape m =
      kernels::paged_kv_map_shape(cache(32, 4, 256, false), 1, 128, 16);
  EXPECT_EQ(m.token_coord, 1);
  const uint64_t dims[5] = {256, 32, 4, 2, (uint64_t{1} << 31) - 1};
  const uint64_t strides[4] = {256, 32 * 256, 4 * 32 * 256, 2 * 4 * 32 * 256};
  const uint32_t box[5] = {128, 16, 1, 1, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.dims[i], dims[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m.strides_bytes[i], strides[i]) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.box[i], box[i]) << i;
}

}  // namespace
}  // namespace pagedattn
