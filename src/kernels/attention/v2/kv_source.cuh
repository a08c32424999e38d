// Where a CTA of the v2 paged attention kernel reads its keys and values: the paged cache through
// the block table, or (the ragged source, FlashInfer's prefill over contiguous K/V) the new
// tokens' rows. The choice is made here once per CTA; the tile loads address both the same way:
// a key's K row is `k + (block * block_stride + slot * token_stride)` and its V columns are
// `v_delta` bytes further. A ragged request has every key in "block" 0, so slot = key, and never
// reads the block table.
#pragma once

#include <cstdint>

#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

struct KvSource {
  const char* k;     // K row of slot 0 in block 0, at this CTA's KV head
  int64_t v_delta;   // bytes from a key's K row to this CTA's V columns
  int block_stride;  // elements (paged)
  int token_stride;  // elements
  int block_shift;   // log2 of the keys per block, or -1 (paged, not a power of two: divide)
  bool paged;        // false: the ragged source (no block-table reads)

  // Slot of `key` in its block (power-of-two blocks avoid the division).
  __device__ __forceinline__ int slot(int key, int block_size) const {
    return block_shift >= 0 ? key & static_cast<int>((1u << block_shift) - 1u) : key % block_size;
  }
};

// Ragged when the caller gave the new tokens and this request's keys are exactly its new tokens
// (no context; key j is token q_start + j). FP8 caches never go ragged (the launcher refuses
// k_new beside them). Without a cache a request with context sees no keys: the backend refuses
// such batches; here it only keeps the CTA from reading through a null cache.
template <typename Cfg, CacheKind kCache>
__device__ __forceinline__ KvSource kv_source(const KernelArgs& a, CtaWork& w) {
  constexpr int kElemBytes = is_fp8(kCache) ? 1 : 2;
  const PagedAttentionParams& p = a.p;
  KvSource s;
  s.paged = is_fp8(kCache) || p.k_new == nullptr || w.ctx != 0;
  if (s.paged) {
    if (p.kv_cache == nullptr) w.kv_len = 0;
    s.k = static_cast<const char*>(p.kv_cache) +
          static_cast<int64_t>(w.kv_head) * a.head_stride * kElemBytes;
    s.v_delta = static_cast<int64_t>(a.kv_stride + w.dchunk * Cfg::kDV) * kElemBytes;
    s.block_stride = a.block_stride;
    s.token_stride = a.token_stride;
    s.block_shift = a.block_shift;
  } else {
    const int64_t first_row = static_cast<int64_t>(w.q_start) * p.new_token_stride +
                              static_cast<int64_t>(w.kv_head) * p.new_head_stride;
    s.k = static_cast<const char*>(p.k_new) + first_row * 2;
    s.v_delta = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.v_new) -
                                     reinterpret_cast<uintptr_t>(p.k_new)) +
                static_cast<int64_t>(w.dchunk) * Cfg::kDV * 2;
    s.block_stride = 0;
    s.token_stride = static_cast<int>(p.new_token_stride);
    s.block_shift = 31;
  }
  return s;
}

}  // namespace pagedattn::kernels::attention::v2
