// The paged KV cache as the geometry of a rank-5 TMA tensor map, shared by every kernel that copies
// cache tiles by TMA (v3 prefill, its FP8 kernel, the decode kernel). Host arithmetic only: the
// callers hand it to their encoder (device/tma.cuh).
//
// The cache [num_blocks, 2, block_size, num_kv_heads, head_size], in any of its layouts (NHD or
// HND), has the dimensions {column, token and head in stride order, plane, block}; boxes are
// box_columns elements of one head's box_tokens tokens. The number of blocks is not known to the
// kernels (the block table only names allocated ones), so that dimension is 2^31 - 1.
#pragma once

#include <cstdint>
#include <utility>

namespace pagedattn::kernels {

struct PagedKvMapShape {
  uint64_t dims[5];
  uint64_t strides_bytes[4];  // of dimensions 1..4
  uint32_t box[5];
  int token_coord;  // which coordinate is the token (1 or 2; the head is the other)
};

// P: a kernel parameter block with the cache fields (kv_cache strides in elements, block_size,
// num_kv_heads, head_size).
template <typename P>
PagedKvMapShape paged_kv_map_shape(const P& p, int elem_bytes, uint32_t box_columns,
                                   uint32_t box_tokens) {
  const bool heads_inner = p.cache_head_stride < p.cache_token_stride;  // NHD
  std::pair<uint64_t, int64_t> token{static_cast<uint64_t>(p.block_size), p.cache_token_stride};
  std::pair<uint64_t, int64_t> head{static_cast<uint64_t>(p.num_kv_heads), p.cache_head_stride};
  if (heads_inner) std::swap(token, head);
  const auto bytes = [elem_bytes](int64_t elements) {
    return static_cast<uint64_t>(elements) * static_cast<uint64_t>(elem_bytes);
  };
  return PagedKvMapShape{
      {static_cast<uint64_t>(p.head_size), token.first, head.first, 2, (uint64_t{1} << 31) - 1},
      {bytes(token.second), bytes(head.second), bytes(p.cache_kv_stride),
       bytes(p.cache_block_stride)},
      {box_columns, heads_inner ? 1u : box_tokens, heads_inner ? box_tokens : 1u, 1, 1},
      heads_inner ? 2 : 1};
}

}  // namespace pagedattn::kernels
