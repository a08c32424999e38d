// Where a CTA of the v2 paged attention kernel reads its keys and values: the paged cache through
// the block table, or (the ragged source, FlashInfer's prefill over contiguous K/V) the new
// tokens' rows. Each source is a template parameter of its own kernels (reads_new_tokens says
// which kernel serves a CTA), so the paged kernels address the cache from the kernel's arguments
// without a source held in registers (a source chosen at run time costs paged prefill speed, and
// both sources in one kernel spilled: docs/performance.md).
#pragma once

#include <cstdint>

#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

// A key row's K and V columns (the CTA's KV head and output-column chunk).
struct KvRows {
  const char* k;
  const char* v;
};

// Both sources address a key row the same way: a 4-byte "block" per key row, staged by
// fetch_tile_blocks from table()[index(key)] into the block-id ring, then rows(block, key).

// The paged cache: key `key` lives in block `block` (from the request's block-table row) at its
// slot.
struct PagedKv {
  static constexpr bool kPaged = true;

  __device__ __forceinline__ static const int32_t* table(const KernelArgs& a, const CtaWork& w) {
    return a.p.block_table + static_cast<int64_t>(w.req) * a.p.block_table_stride;
  }
  // Power-of-two block sizes (the common case) avoid the integer division.
  __device__ __forceinline__ static int index(const KernelArgs& a, int key) {
    return a.block_shift >= 0 ? key >> a.block_shift : key / a.p.block_size;
  }
  __device__ __forceinline__ static int key_slot(const KernelArgs& a, int key) {
    return a.block_shift >= 0 ? key & (a.p.block_size - 1) : key % a.p.block_size;
  }

  template <typename Cfg, int kElemBytes>
  __device__ __forceinline__ static KvRows rows(const KernelArgs& a, const CtaWork& w, int block,
                                                int key) {
    const int head_off = w.kv_head * a.head_stride;
    const int64_t row = (static_cast<int64_t>(block) * a.block_stride +
                         key_slot(a, key) * a.token_stride + head_off) *
                        kElemBytes;
    return {static_cast<const char*>(a.p.k_cache) + row,
            static_cast<const char*>(a.p.v_cache) + row + w.dchunk * Cfg::kDV * kElemBytes};
  }
};

// The new tokens' rows (16-bit, the query's dtype): key j of the request is token q_start + j.
// Its "block" is the request's first token (cu_seqlens_q[req], staged like a block id), so the
// rows are addressed in the paged form and nothing per CTA stays in registers.
struct RaggedKv {
  static constexpr bool kPaged = false;

  __device__ __forceinline__ static const int32_t* table(const KernelArgs& a, const CtaWork& w) {
    return a.p.cu_seqlens_q + w.req;
  }
  __device__ __forceinline__ static int index(const KernelArgs&, int) { return 0; }

  template <typename Cfg, int kElemBytes>
  __device__ __forceinline__ static KvRows rows(const KernelArgs& a, const CtaWork& w,
                                                int first_token, int key) {
    const int64_t off = (static_cast<int64_t>(first_token + key) * a.new_token_stride +
                         w.kv_head * a.new_head_stride) *
                        2;
    const char* k = static_cast<const char*>(a.p.k_new) + off;
    return {k, k + a.new_v_delta + w.dchunk * Cfg::kDV * 2};
  }
};

// Whether a CTA reads the ragged source: the caller gave the new tokens and its request's keys
// are exactly its new tokens (no context). The paged and the ragged kernels both ask, and each
// serves only its own requests. FP8 caches never go ragged (the launcher refuses k_new beside
// them); without a cache only the ragged kernels run (no request may have context then).
__device__ __forceinline__ bool reads_new_tokens(const KernelArgs& a, const CtaWork& w) {
  return a.p.k_new != nullptr && w.ctx == 0;
}

}  // namespace pagedattn::kernels::attention::v2
