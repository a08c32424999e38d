// One plane (K or V) of the paged KV cache as the geometry of a TMA tensor map, shared by every
// kernel that copies cache tiles by TMA (v3 prefill, its FP8 kernel, the decode kernel): K and V
// may lie anywhere, so each plane has a map of its own over the same strides. Host arithmetic only:
// the callers hand it to their encoder (device/tma.cuh).
//
// A plane [num_blocks, block_size, num_kv_heads, head_size], in any of its layouts (NHD or HND),
// has the dimensions {column, token and head in stride order, block}; boxes are box_columns
// elements of one head's box_tokens tokens. The number of blocks is not known to the kernels (the
// block table only names allocated ones), so that dimension is 2^31 - 1. The v3 prefill has two
// more shapes whose boxes hold every 64-column panel of a head: the panel map (a whole KV tile)
// and the group map (a whole page smaller than the tile).
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/paged_operands.h"

namespace pagedattn::kernels {

struct PagedKvMapShape {
  int rank;  // 4 or 5; entries past it are unused
  uint64_t dims[5];
  uint64_t strides_bytes[4];  // of dimensions 1..rank-1
  uint32_t box[5];
  int token_coord;  // which coordinate is the token (1 or 2; the head is the other)
};

// The extent of a dimension the kernels cannot bound (the blocks, above; the group map's groups):
// the largest a 32-bit TMA coordinate reaches.
inline constexpr uint64_t kMapUnbounded = (uint64_t{1} << 31) - 1;

// From the parameter block's cache fields (plane strides in elements, block_size, num_kv_heads,
// head_size).
inline PagedKvMapShape paged_kv_map_shape(const PagedOperands& p, int elem_bytes,
                                          uint32_t box_columns, uint32_t box_tokens) {
  const bool heads_inner = p.cache_head_stride < p.cache_token_stride;  // NHD
  std::pair<uint64_t, int64_t> token{static_cast<uint64_t>(p.block_size), p.cache_token_stride};
  std::pair<uint64_t, int64_t> head{static_cast<uint64_t>(p.num_kv_heads), p.cache_head_stride};
  if (heads_inner) std::swap(token, head);
  const auto bytes = [elem_bytes](int64_t elements) {
    return static_cast<uint64_t>(elements) * static_cast<uint64_t>(elem_bytes);
  };
  return PagedKvMapShape{
      4,
      {static_cast<uint64_t>(p.head_size), token.first, head.first, kMapUnbounded, 0},
      {bytes(token.second), bytes(head.second), bytes(p.cache_block_stride), 0},
      {box_columns, heads_inner ? 1u : box_tokens, heads_inner ? box_tokens : 1u, 1, 0},
      heads_inner ? 2 : 1};
}

// Which coordinate a panel map (paged_kv_panel_map_shape) puts the KV head in.
enum class PanelFold : int8_t {
  kNone,   // no panel map: one box per 64-column panel (paged_kv_map_shape)
  kPanel,  // NHD, rank 4 {column, token, head x panels + panel, block}
  kHead,   // HND, rank 5 {column, token, panel, head, block}
};

// The plane with the 64-column panels of a head as a dimension of their own, after the token, so
// that one box holds box_tokens tokens of every panel of one head, panel after panel (the layout
// of a KV tile in shared memory: {64 columns, token, panel}). Possible when the head size is whole
// 128-byte panels and, for NHD, a token's heads are contiguous (head stride = head size: the head
// folds into the panel coordinate); HND always (the head keeps a dimension). Else kNone (and *m
// untouched).
inline PanelFold paged_kv_panel_map_shape(const PagedOperands& p, int elem_bytes,
                                          uint32_t box_tokens, PagedKvMapShape* m) {
  const int64_t panel_elems = 128 / elem_bytes, panels = p.head_size / panel_elems;
  if (p.head_size % panel_elems != 0) return PanelFold::kNone;
  const bool nhd = p.cache_head_stride < p.cache_token_stride;
  if (nhd && p.cache_head_stride != p.head_size) return PanelFold::kNone;
  const auto bytes = [elem_bytes](int64_t elements) {
    return static_cast<uint64_t>(elements) * static_cast<uint64_t>(elem_bytes);
  };
  const uint64_t heads = static_cast<uint64_t>(p.num_kv_heads);
  const uint64_t columns = static_cast<uint64_t>(panel_elems);
  const uint64_t tokens = static_cast<uint64_t>(p.block_size);
  const uint32_t box[5] = {static_cast<uint32_t>(panel_elems), box_tokens,
                           static_cast<uint32_t>(panels), 1, 1};
  if (nhd) {
    *m = PagedKvMapShape{4,
                         {columns, tokens, heads * panels, kMapUnbounded, 0},
                         {bytes(p.cache_token_stride), 128, bytes(p.cache_block_stride), 0},
                         {box[0], box[1], box[2], 1, 0},
                         1};
    return PanelFold::kPanel;
  }
  *m = PagedKvMapShape{
      5,
      {columns, tokens, static_cast<uint64_t>(panels), heads, kMapUnbounded},
      {bytes(p.cache_token_stride), 128, bytes(p.cache_head_stride), bytes(p.cache_block_stride)},
      {box[0], box[1], box[2], box[3], box[4]},
      1};
  return PanelFold::kHead;
}

// The plane in groups of 8 tokens: dimensions {64 columns, token, panel, head, group}, where a
// group is 8 consecutive token slots of one (block, head) page and group g starts at token row 8g
// of the plane counted in token strides. One box {64, 8, panels, 1, box_groups} lands box_groups x
// 8 tokens of every 64-column panel of one head in shared memory group after group, each group's
// panels after each other (the v3 prefill's group-major K/V tiles): one box per page of 16 or more
// tokens where the per-panel map needs one per page and panel. The block folds into the group
// coordinate, so block b's page starts at group b * groups_per_block. A TMA copy's issue holds its
// thread longer per 8-row group than a panel map box's per row, so whole-tile pages keep the panel
// map.
struct PagedKvGroupMapShape {
  PagedKvMapShape map;
  int64_t groups_per_block;
};

// Possible when the head size is whole 128-byte panels, pages are whole groups and the block
// stride is whole groups (8 token strides): the cache's own layouts, NHD and HND. Else false (and
// *m untouched).
inline bool paged_kv_group_map_shape(const PagedOperands& p, int elem_bytes, uint32_t box_groups,
                                     PagedKvGroupMapShape* m) {
  const int64_t panel_elems = 128 / elem_bytes, group = 8 * p.cache_token_stride;
  if (p.head_size % panel_elems != 0 || p.block_size % 8 != 0 || group <= 0 ||
      p.cache_block_stride % group != 0) {
    return false;
  }
  const auto bytes = [elem_bytes](int64_t elements) {
    return static_cast<uint64_t>(elements) * static_cast<uint64_t>(elem_bytes);
  };
  const uint64_t panels = static_cast<uint64_t>(p.head_size / panel_elems);
  *m = PagedKvGroupMapShape{
      {5,
       {static_cast<uint64_t>(panel_elems), 8, panels, static_cast<uint64_t>(p.num_kv_heads),
        kMapUnbounded},
       {bytes(p.cache_token_stride), 128, bytes(p.cache_head_stride), bytes(group)},
       {static_cast<uint32_t>(panel_elems), 8, static_cast<uint32_t>(panels), 1, box_groups},
       1},
      p.cache_block_stride / group};
  return true;
}

}  // namespace pagedattn::kernels
