// Geometry, shared memory and arguments of the first Hopper ("v3") prefill kernel: head size 128,
// 16-bit Q and K/V, pages of a multiple of 128 tokens (one KV tile never crosses a page, so TMA
// copies whole tiles).
//
// A CTA has three warpgroups: warpgroup 0 is the producer (one warp issues TMA copies of Q once
// and of K and V tiles into a two-stage ring), warpgroups 1 and 2 are consumers, each owning 64 of
// the tile's 128 query rows. Tiles in shared memory are 128 rows x 128 columns as two 64-column
// panels of 128-byte rows, 128-byte swizzled (device/wgmma.cuh).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention/mask.h"

namespace pagedattn::kernels::attention::v3 {

struct PrefillShape {
  static constexpr int kHeadDim = 128;
  static constexpr int kBlockM = 128;  // query rows per CTA
  static constexpr int kBlockN = 128;  // keys per KV tile
  static constexpr int kStages = 2;
  static constexpr int kPanelBytes = 128 * 128;       // 128 rows of 64 16-bit columns
  static constexpr int kTileBytes = 2 * kPanelBytes;  // kHeadDim columns
  static constexpr int kRowsPerConsumer = 64;
  static constexpr int kThreads = 3 * 128;
  // Registers per thread after reallocation: 128 * 56 + 256 * 224 = 64,512 of the SM's 65,536.
  // ptxas spills the producer (its cp.async path for a partial V tile) at 40 and below; the
  // consumers hold S, O (64 floats each) and P (32 registers) at once without spilling at 224.
  static constexpr int kProducerRegisters = 56;
  static constexpr int kConsumerRegisters = 224;
};

struct PrefillSmem {
  uint8_t q[PrefillShape::kTileBytes];
  uint8_t k[PrefillShape::kStages][PrefillShape::kTileBytes];
  uint8_t v[PrefillShape::kStages][PrefillShape::kTileBytes];
  uint64_t q_full;
  uint64_t k_full[PrefillShape::kStages];
  uint64_t k_empty[PrefillShape::kStages];
  uint64_t v_full[PrefillShape::kStages];
  uint64_t v_empty[PrefillShape::kStages];
};
// The dynamic allocation leaves room to align the tiles to 1024 bytes (the swizzle's period).
constexpr size_t kPrefillSmemBytes = sizeof(PrefillSmem) + 1024;

// What the kernel reads besides the two tensor maps. Sizes and strides as in
// kernels::PagedAttentionParams (elements).
struct PrefillArgs {
  const int32_t* cu_seqlens_q;  // [num_reqs + 1] device
  const int32_t* seqused_k;     // [num_reqs] device
  const int32_t* block_table;   // [num_reqs, block_table_stride] device
  int64_t block_table_stride;
  const uint16_t*
      kv_cache;  // the last V tile of a request is copied with cp.async (zeros past its keys)
  int64_t cache_block_stride, cache_kv_stride, cache_token_stride, cache_head_stride;
  int block_size;
  int kv_token_coord;  // position of the token coordinate in the KV map (1 or 2; the head is the
                       // other)
  int group;           // query heads per KV head
  float scale;
  float scale_log2;  // scale * log2(e)
  MaskRule mask;     // causal or not; no window yet (the launcher rejects one)
  uint16_t* out;     // [num_tokens, num_heads, 128]
  int64_t out_token_stride, out_head_stride;
  float* lse;  // [num_heads, lse_head_stride] natural log, or nullptr
  int64_t lse_head_stride;
};

}  // namespace pagedattn::kernels::attention::v3
