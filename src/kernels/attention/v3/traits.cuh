// Geometry, shared memory and arguments of the Hopper ("v3") prefill kernel, per head size (64,
// 96, 128, 192, 256): 16-bit Q and K/V, pages that hold whole KV tiles or divide them (TMA copies
// whole tiles or one box per page).
//
// A CTA has three or four warpgroups: warpgroup 0 is the producer (Q once per work tile by TMA, K
// and V tiles into a ring: v3/mainloop_load.cuh), the others are consumers, each owning 64 of the
// tile's query rows (128 with two consumers, 192 with three). Tiles in shared memory are panels of
// 64 16-bit columns with 128-byte rows, 128-byte swizzled (device/wgmma.cuh): one panel at D 64,
// two at 96 and 128, three at 192, four at 256 (K/V tiles may instead lie in 8-row groups of every
// panel: KvTileStrides). At D 96 the second panel's columns 96..127 are the zeros TMA writes
// outside the tensor (the maps' column dimension is the head size).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/mask.h"
#include "kernels/paged_kv_map.h"

namespace pagedattn::kernels::attention::v3 {

// Per head size, chosen by the register and shared-memory budgets:
// - D 64, 96 and 128: 128-key tiles. A consumer thread holds S (64 floats), P (32 registers) and O
//   (D / 2 floats; 64 at D 96, below). D 64 does half the matrix work per tile for the same
//   softmax, so it has three consumers (below) and a third stage (24 + 3 * 32 KB) to cover TMA
//   latency; D 128 and D 96 keep two (docs/performance.md).
// - D 192 and 256: 64-key tiles. 128-key tiles would need 64 KB (Q) + 2 stages x 2 x 64 KB = 320 KB
//   of the 227 KB at D 256 (240 KB at D 192), and S + P + O = 64 + 32 + 128 registers of the 224;
//   at 64 keys Q 64 KB + 2 x 2 x 32 KB = 192 KB and S + P + O = 32 + 16 + 128 (D 192: 144 KB, 144).
// - O in chunks of one P·V wgmma each (N 64 or 128, what device/wgmma.cuh has): one of 64 columns
//   at D 64, 128 at D 96 (columns 96..127 are P times TMA's zero columns, computed and not stored:
//   a quarter of that product wasted, an N 96 wgmma would save it), two of 128 at D 128 and 256,
//   three of 64 at D 192.
template <int kD>
struct PrefillTraits {
  static_assert(kD == 64 || kD == 96 || kD == 128 || kD == 192 || kD == 256,
                "v3 prefill head sizes: 64, 96, 128, 192, 256");
  static constexpr int kHeadDim = kD;
  // D 64 does half the matrix work of D 128 per tile for the same softmax, so two consumers cannot
  // hide one's softmax behind the other's products: three take turns (192 query rows).
  static constexpr int kConsumers = kD == 64 ? 3 : 2;  // warpgroups of 64 query rows
  static constexpr int kBlockM = 64 * kConsumers;      // query rows per work tile
  static constexpr int kBlockN = kD > 128 ? 64 : 128;  // keys per KV tile
  static constexpr int kStages = kD == 64 ? 3 : 2;
  // Q buffers: two where they fit, so a tile's Q loads during the previous tile (D 192: 48 KB
  // each, D 256: 64 KB).
  static constexpr int kQStages = kD > 128 ? 1 : 2;
  // O staged through shared memory for 16-byte global stores: one 64-row tile per consumer where
  // it fits (D 128: 192 + 32 KB of the 227), not above D 128; whole 64-column panels only (not
  // D 96).
  static constexpr bool kStagedO = kD == 64 || kD == 128;
  static constexpr int kOStageBytes = kStagedO ? 64 * kD * 2 : 16;
  static constexpr int kPanels = (kD + 63) / 64;
  static constexpr int kQPanelBytes = kBlockM * 128;  // kBlockM rows of 64 16-bit columns
  static constexpr int kKvPanelBytes = kBlockN * 128;
  static constexpr int kQTileBytes = kPanels * kQPanelBytes;
  static constexpr int kKvTileBytes = kPanels * kKvPanelBytes;
  static constexpr int kScoreRegs = kBlockN / 2;  // S of 64 rows x kBlockN keys per thread
  static constexpr int kKeySteps = kBlockN / 16;  // k16 steps of P·V (P fragments per thread)
  static constexpr int kOChunkCols = kD == 64 || kD == 192 ? 64 : 128;  // O columns per P·V wgmma
  static constexpr int kOChunks = (kD + kOChunkCols - 1) / kOChunkCols;
  static constexpr int kOChunkRegs = kOChunkCols / 2;
  static constexpr int kRowsPerConsumer = 64;
  static constexpr int kThreads = (1 + kConsumers) * 128;
  // The softmax of S_i beside P_{i-1}·V_{i-1} (Consumer::retire_pv) with 128-key tiles; the 64-key
  // tiles' softmax is short beside a long P·V, so they keep the wait before the softmax
  // (docs/performance.md).
  static constexpr bool kSoftmaxBesidePv = kBlockN == 128;
  // Registers per thread after reallocation, of the SM's 65,536: two consumers 128 * 56 + 256 *
  // 224 = 64,512 (ptxas spills the producer, its cp.async paths, at 40 and below); three 128 * 32 +
  // 384 * 160 = 65,536 (the consumers spill at 152; the producer spills about 80 bytes at 32, off
  // the matrix path). setmaxnreg only moves what the launch gave the CTA (threads x the launch
  // bound's registers, 65,536 / threads rounded down to 8): four consumers (640 threads, 96 each)
  // hung setmaxnreg.inc at 32 / 120 and need 32 / 112.
  static constexpr int kProducerRegisters = kConsumers == 3 ? 32 : 56;
  static constexpr int kConsumerRegisters = kConsumers == 3 ? 160 : 224;
};

template <int kD>
struct PrefillSmem {
  using S = PrefillTraits<kD>;
  uint8_t q[S::kQStages][S::kQTileBytes];
  uint8_t k[S::kStages][S::kKvTileBytes];
  uint8_t v[S::kStages][S::kKvTileBytes];
  uint8_t o[S::kConsumers][S::kOStageBytes];
  uint64_t q_full[S::kQStages];
  uint64_t q_empty[S::kQStages];  // every consumer is done with Q's last product of a work tile
  uint64_t k_full[S::kStages];
  uint64_t k_empty[S::kStages];
  uint64_t v_full[S::kStages];
  uint64_t v_empty[S::kStages];
};
// The dynamic allocation leaves room to align the tiles to 1024 bytes (the swizzle's period).
template <int kD>
constexpr size_t prefill_smem_bytes() {
  return sizeof(PrefillSmem<kD>) + 1024;
}

// Where a K/V tile's rows lie in its ring slot (bytes; the wgmma descriptors' strides):
// panel-major, each 64-column panel's kBlockN rows together, or group-major
// (PrefillArgs::kv_group_major), each 8-row group's panels together, so that one TMA box lands a
// page of every panel.
struct KvTileStrides {
  uint32_t panel;  // from a row's 64-column panel to its next
  uint32_t group;  // from 8 rows of a panel to the next 8
};
template <int kD>
__host__ __device__ __forceinline__ KvTileStrides kv_tile_strides(bool group_major) {
  using S = PrefillTraits<kD>;
  return group_major ? KvTileStrides{1024, S::kPanels * 1024}
                     : KvTileStrides{S::kKvPanelBytes, 1024};
}

// Log2 units a row maximum must grow by to move (v3/softmax.cuh): P stays below 2^8, and O's
// rescale is rare once the maxima settle.
inline constexpr float kRescaleThreshold = 8.0f;

// The score transforms of mask.h for the consumers of the kernel that applies them (`transform`),
// in the units the softmax scales (PrefillArgs::scale_log2): with a soft cap the score is
// tanh(x * cap_pre) for a raw score x (make_soft_cap with out_scale 1: units of the cap, the
// softmax's scale folds in cap_post = cap), else x itself; ALiBi subtracts slope[head] *
// slope_factor * |pos - key| (slope_factor: natural-log units to score units). Each costs only
// what it adds: the scale stays in the softmax's FMA.
struct ScoreRule {
  bool transform;
  bool capped;
  float cap_pre;
  const float* alibi_slopes;  // [num_heads] natural-log units, or nullptr
  float slope_factor;
};

// What the kernel reads besides the two tensor maps. Sizes and strides as in
// kernels::PagedAttentionParams (elements).
struct PrefillArgs {
  const int32_t* cu_seqlens_q;  // [num_reqs + 1] device
  const int32_t* seqused_k;     // [num_reqs] device
  const int32_t* block_table;   // [num_reqs, block_table_stride] device
  int64_t block_table_stride;
  const uint16_t* v_cache;  // a request's last V tile is copied with cp.async (zeros past its keys)
  int64_t cache_block_stride, cache_token_stride, cache_head_stride;
  int block_size;
  int box_warps;         // producer warps issuing the K/V TMA boxes (1 to 4)
  int kv_token_coord;    // position of the token coordinate in the KV map (1 or 2; the head is the
                         // other), with panel_fold kNone
  PanelFold panel_fold;  // one box per whole KV tile (kernels/paged_kv_map.h), or kNone
  // Pages smaller than the tile by the group map (kernels/paged_kv_map.h): one box per page, the
  // tile group-major (KvTileStrides); block b's page starts at group b * kv_groups_per_block.
  bool kv_group_major;
  int kv_groups_per_block;
  int group;  // query heads per KV head
  // GQA packing (the kPacked kernel, PagedAttentionParams::pack_gqa): a work tile is the `group`
  // query heads of one KV head over packed_positions query positions, tile row r = position r /
  // group, head r % group of the KV head's group (one Q box of group x packed_positions rows per
  // panel), so K/V are read once per KV head. 0: unpacked (a tile is one head's kBlockM positions).
  int num_kv_heads;
  int packed_positions;  // kBlockM / group when packed
  // Work tiles (query head, request, query tile of kBlockM rows; packed: KV head, request, tile of
  // packed_positions positions), numbered head fastest and query
  // tiles from the last (the most keys under a causal mask) to the first; CTA b serves tiles b, b +
  // gridDim.x, ...
  int num_heads;
  int num_reqs;  // request slots (kernels::request_slots)
  int num_q_tiles;  // of the longest request
  bool staged_o;    // O through shared memory (kStagedO sizes, 16-byte aligned output rows)
  // Score units (ScoreRule): the raw score q . k, or tanh(q . k * scale / cap) with a soft cap.
  float scale;          // natural-log units per score unit (the softmax scale, or the cap)
  float scale_log2;     // base-2 units per score unit (scale * log2(e))
  ScoreRule score;      // soft cap and ALiBi (v3/score_mask.cuh), applied by the kTransform kernel
  const float* sinks;   // [num_heads] natural-log logits in every row's denominator, or nullptr
  mask::MaskRule mask;  // causal or not, sliding window
  uint16_t* out;        // [num_tokens, num_heads, head size]
  int64_t out_token_stride, out_head_stride;
  float* lse;  // [num_heads, lse_head_stride] natural log, or nullptr
  int64_t lse_head_stride;
  // Split-KV: work tile t serves split t % max_splits of its KV tiles (v3/tile_scheduler.cuh) and
  // writes partials for the combine (kernels/attention/split_combine.cuh) instead of out / lse.
  int max_splits;                 // 1: no split (split_out and split_lse unused)
  const int32_t* splits_per_req;  // [num_reqs] device, or nullptr: max_splits each
  float* split_out;               // [max_splits, num_tokens, num_heads, head size] normalised
  float* split_lse;               // [max_splits, num_heads, num_tokens] natural log, no sinks
  int num_tokens;
  const int32_t* pass_requests;  // slot -> request (-1: empty), or nullptr: slot = request
};

}  // namespace pagedattn::kernels::attention::v3
