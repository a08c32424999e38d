// The tensor-map geometry of a plane of the paged cache (kernels/paged_kv_map.h), which the v3
// prefill, its FP8 kernel and the decode kernel encode once for K and once for V: dimensions in
// stride order for both layouts, byte strides, boxes of one head's tokens; the v3 prefill's panel
// maps (a whole KV tile per box), its group maps (a whole page of every panel per box: their
// coordinates name the plane's bytes) and the layouts that cannot have them.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/paged_kv_map.h"

namespace pagedattn {
namespace {

// A plane of [blocks, 2, block, heads, d] (vLLM's one-tensor cache: blocks hold both planes) with
// the given layout's token and head strides (elements).
kernels::PagedAttentionParams cache(int block, int heads, int d, bool nhd) {
  kernels::PagedAttentionParams p;
  p.block_size = block;
  p.num_kv_heads = heads;
  p.head_size = d;
  p.cache_token_stride = nhd ? int64_t{heads} * d : d;
  p.cache_head_stride = nhd ? d : int64_t{block} * d;
  p.cache_block_stride = 2 * int64_t{block} * heads * d;
  return p;
}

constexpr uint64_t kBlocks = (uint64_t{1} << 31) - 1;

template <int kRank>
void expect_shape(const kernels::PagedKvMapShape& m, const uint64_t (&dims)[kRank],
                  const uint64_t (&strides)[kRank - 1], const uint32_t (&box)[kRank]) {
  ASSERT_EQ(m.rank, kRank);
  for (int i = 0; i < kRank; ++i) EXPECT_EQ(m.dims[i], dims[i]) << i;
  for (int i = 0; i + 1 < kRank; ++i) EXPECT_EQ(m.strides_bytes[i], strides[i]) << i;
  for (int i = 0; i < kRank; ++i) EXPECT_EQ(m.box[i], box[i]) << i;
}

TEST(PagedKvMap, NhdHasHeadsInsideTokens) {
  const kernels::PagedKvMapShape m =
      kernels::paged_kv_map_shape(cache(16, 8, 128, true), 2, 64, 16);
  EXPECT_EQ(m.token_coord, 2);
  expect_shape<4>(m, {128, 8, 16, kBlocks}, {128 * 2, 8 * 128 * 2, 2 * 16 * 8 * 128 * 2},
                  {64, 1, 16, 1});
}

TEST(PagedKvMap, HndHasTokensInsideHeads) {
  // FP8 bytes, the decode kernel's boxes of 128 columns x 16 tokens.
  const kernels::PagedKvMapShape m =
      kernels::paged_kv_map_shape(cache(32, 4, 256, false), 1, 128, 16);
  EXPECT_EQ(m.token_coord, 1);
  expect_shape<4>(m, {256, 32, 4, kBlocks}, {256, 32 * 256, 2 * 4 * 32 * 256}, {128, 16, 1, 1});
}

// NHD, heads contiguous in a token: the heads' panels are one dimension of 128-byte steps after
// the token (panel coordinate head * 4 + panel at D 256).
TEST(PagedKvMap, NhdPanelMapFoldsHeadsIntoPanels) {
  kernels::PagedKvMapShape m{};
  EXPECT_EQ(kernels::paged_kv_panel_map_shape(cache(128, 4, 256, true), 2, 64, &m),
            kernels::PanelFold::kPanel);
  expect_shape<4>(m, {64, 128, 16, kBlocks}, {4 * 256 * 2, 128, 2 * 128 * 4 * 256 * 2},
                  {64, 64, 4, 1});
}

// HND: the head keeps a dimension of head strides after the panels.
TEST(PagedKvMap, HndPanelMapKeepsTheHead) {
  kernels::PagedKvMapShape m{};
  EXPECT_EQ(kernels::paged_kv_panel_map_shape(cache(256, 8, 128, false), 2, 128, &m),
            kernels::PanelFold::kHead);
  expect_shape<5>(m, {64, 256, 2, 8, kBlocks}, {128 * 2, 128, 256 * 128 * 2, 2 * 8 * 256 * 128 * 2},
                  {64, 128, 2, 1, 1});
}

// No panel map where the head size is not whole panels or the heads are not contiguous; the shape
// given stays as it was.
TEST(PagedKvMap, PanelMapNeedsWholePanelsAndContiguousHeads) {
  const kernels::PagedKvMapShape before =
      kernels::paged_kv_map_shape(cache(128, 8, 96, true), 2, 64, 128);
  kernels::PagedKvMapShape m = before;
  EXPECT_EQ(kernels::paged_kv_panel_map_shape(cache(128, 8, 96, true), 2, 128, &m),
            kernels::PanelFold::kNone);
  kernels::PagedAttentionParams padded_heads = cache(128, 8, 128, true);
  padded_heads.cache_head_stride = 136;
  padded_heads.cache_token_stride = 8 * 136;
  EXPECT_EQ(kernels::paged_kv_panel_map_shape(padded_heads, 2, 128, &m), kernels::PanelFold::kNone);
  expect_shape<4>(m, {before.dims[0], before.dims[1], before.dims[2], before.dims[3]},
                  {before.strides_bytes[0], before.strides_bytes[1], before.strides_bytes[2]},
                  {before.box[0], before.box[1], before.box[2], before.box[3]});
}

// The byte offset a group map's coordinates name.
uint64_t map_offset(const kernels::PagedKvMapShape& m, const uint64_t (&coords)[5]) {
  uint64_t offset = coords[0] * 2;  // 16-bit columns
  for (int i = 1; i < 5; ++i) offset += coords[i] * m.strides_bytes[i - 1];
  return offset;
}

// The byte offset of token `token` of (block, head) in the plane.
uint64_t cache_offset(const kernels::PagedAttentionParams& p, int64_t block, int64_t head,
                      int64_t token) {
  return 2 * static_cast<uint64_t>(block * p.cache_block_stride + head * p.cache_head_stride +
                                   token * p.cache_token_stride);
}

// NHD at block 16: a box is one page's 16 tokens (two groups) of both panels; block b's page starts
// at group 4b (a block holds both planes), so the map's coordinates name the plane's bytes.
TEST(PagedKvMap, NhdGroupMapHoldsAPageOfEveryPanel) {
  const kernels::PagedAttentionParams p = cache(16, 8, 128, true);
  kernels::PagedKvGroupMapShape g{};
  ASSERT_TRUE(kernels::paged_kv_group_map_shape(p, 2, 2, &g));
  expect_shape<5>(g.map, {64, 8, 2, 8, kernels::kMapUnbounded},
                  {8 * 128 * 2, 128, 128 * 2, 8 * 8 * 128 * 2}, {64, 8, 2, 1, 2});
  EXPECT_EQ(g.groups_per_block, 4);
  for (int64_t block : {0, 5, 1000}) {
    const uint64_t group = block * g.groups_per_block;
    // Token 11 (group 1, row 3), head 6, panel 1, column 5.
    EXPECT_EQ(map_offset(g.map, {5, 3, 1, 6, group + 1}),
              cache_offset(p, block, 6, 11) + (64 + 5) * 2);
  }
}

// HND at block 32, D 256: a box is one page's 32 tokens (four groups) of four panels; a page holds
// 4 groups, a block 2 x 8 heads of them, and the head is the map's own dimension.
TEST(PagedKvMap, HndGroupMapHoldsAPageOfEveryPanel) {
  const kernels::PagedAttentionParams p = cache(32, 8, 256, false);
  kernels::PagedKvGroupMapShape g{};
  ASSERT_TRUE(kernels::paged_kv_group_map_shape(p, 2, 4, &g));
  expect_shape<5>(g.map, {64, 8, 4, 8, kernels::kMapUnbounded},
                  {256 * 2, 128, 32 * 256 * 2, 8 * 256 * 2}, {64, 8, 4, 1, 4});
  EXPECT_EQ(g.groups_per_block, 2 * 8 * 4);
  // Block 7, head 3, token 26 (group 3, row 2), panel 3, column 63.
  const uint64_t group = 7 * g.groups_per_block + 3;
  EXPECT_EQ(map_offset(g.map, {63, 2, 3, 3, group}), cache_offset(p, 7, 3, 26) + (192 + 63) * 2);
}

// No group map where the head size is not whole panels, pages are not whole groups, or the block
// stride is not whole groups; the shape given stays as it was.
TEST(PagedKvMap, GroupMapNeedsWholePanelsAndGroups) {
  kernels::PagedKvGroupMapShape g{};
  g.groups_per_block = 17;
  EXPECT_FALSE(kernels::paged_kv_group_map_shape(cache(128, 8, 96, true), 2, 16, &g));
  EXPECT_FALSE(kernels::paged_kv_group_map_shape(cache(12, 8, 128, true), 2, 1, &g));
  kernels::PagedAttentionParams padded_blocks = cache(16, 8, 128, false);
  padded_blocks.cache_block_stride += 8;
  EXPECT_FALSE(kernels::paged_kv_group_map_shape(padded_blocks, 2, 2, &g));
  EXPECT_EQ(g.groups_per_block, 17);
}

}  // namespace
}  // namespace pagedattn
