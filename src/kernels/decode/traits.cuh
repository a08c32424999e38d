// Tile configuration of the decode kernel and the arguments it receives.
//
// A CTA has 4 warps (by default) and runs one work unit at a time: 16 packed query rows (one m16
// tile) of one KV head against a key range. Every warp holds the whole query tile in registers
// and takes its own share of each KV tile's keys, with its own online-softmax state; the
// epilogue merges the warps. 16-bit caches run bf16/f16 MMAs on tiles of 64 keys; FP8 caches
// stay FP8 in shared memory (half the bytes per key, so tiles of 128 keys at D <= 128) and are
// converted in registers, with f16 MMAs (every FP8 value is exact in f16).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/cache_kind.h"
#include "kernels/decode/decode_attention.h"
#include "kernels/decode/work.h"

namespace pagedattn::kernels::decode {

// Who copies a KV tile and who waits for it. kCta: every thread copies (cp.async) a share of the
// whole tile and a block barrier per tile publishes it. kWarpTma: one lane of each warp copies
// the warp's keys by TMA (boxes of 16 keys x 128 bytes, 128-byte swizzle, no row padding) and the
// warp waits on its own mbarrier of the stage, so the warps run free inside a unit.
enum class TileSync { kCta, kWarpTma };

// The CTA's units form one stream of KV tiles: the copies of the next unit's first tiles are in
// flight during this unit's last tiles and epilogue. kWarps: warps per CTA, each with
// kBlockN / kWarps keys of every tile.
template <int kHeadDim_, CacheKind kCache_, int kBlockN_, int kStages_, int kWarps_ = 4,
          TileSync kSync_ = TileSync::kCta>
struct DecodeConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr CacheKind kCache = kCache_;
  static constexpr bool kFp8 = is_fp8(kCache);
  static constexpr int kElemBytes = kFp8 ? 1 : 2;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockN = kBlockN_;  // keys per KV tile
  static constexpr int kWarpKeys = kBlockN / kWarps;
  static constexpr int kStages = kStages_;  // pipeline depth
  static constexpr TileSync kSync = kSync_;
  static constexpr bool kTma = kSync == TileSync::kWarpTma;
  // The key rows whose block ids one thread group fetches, and the group's threads: the tile and
  // the CTA (cp.async), or the warp's keys and the warp (TMA).
  static constexpr int kIdRows = kTma ? kWarpKeys : kBlockN;
  static constexpr int kIdThreads = kTma ? 32 : kThreads;
  static constexpr int kKSteps = kHeadDim / 16;  // k16 steps of Q K^T; 16-column chunks of V
  // The next unit's query fragments load during a unit's epilogue: up to D 128 (above, its 4 *
  // kKSteps registers beside the epilogue's O spill: D 256 FP8 700 bytes against 100).
  static constexpr bool kPrefetchQ = kHeadDim <= 128;
  static constexpr int kChunks = kHeadDim * kElemBytes / 16;  // 16-byte chunks per row
  // cp.async tiles: rows padded by 16 bytes (an odd number of 16-byte chunks keeps ldmatrix
  // conflict-free). TMA tiles: per warp, one box per 16 keys (a page holds them), each kPanels
  // panels of 16 rows x 128 bytes, swizzled.
  static constexpr int kRowBytes = kTma ? 128 : kHeadDim * kElemBytes + 16;
  static constexpr int kPanels = kChunks / 8;
  static constexpr int kPanelBytes = 16 * 128;
  static constexpr int kBoxBytes = kPanels * kPanelBytes;         // 16 keys of K or V (TMA)
  static constexpr int kSliceBytes = kWarpKeys / 16 * kBoxBytes;  // one warp's keys (TMA)
  static constexpr int kTileBytes = kTma ? kWarps * kSliceBytes : kBlockN * kRowBytes;  // K or V
  static constexpr int kStageBytes = 2 * kTileBytes;
  // Block ids of the key rows: fetched kStages - 1 tiles ahead of the K/V copies that use them.
  static constexpr int kRingTiles = 2 * kStages - 2;
  static constexpr int kRingBytes = kRingTiles * kBlockN * 4;
  // Epilogue: each warp's unnormalized O rows, then its row maxima and sums. The rows' float4
  // groups are XOR-swizzled by the row (decode/epilogue.cuh) where the row is whole blocks of 8
  // groups, else the rows are padded, against bank conflicts.
  static constexpr bool kSwizzleO = kHeadDim % 32 == 0;
  static constexpr int kORowFloats = kSwizzleO ? kHeadDim : kHeadDim + 4;
  static constexpr int kEpilogueOBytes = kWarps * kDecodeRowsPerTile * kORowFloats * 4;
  static constexpr int kEpilogueMlBytes = kWarps * kDecodeRowsPerTile * 2 * 4;
  static constexpr int kBarrierBytes = kTma ? kStages * kWarps * 8 : 0;
  // The CTA's unit sequence (decode/tile_scheduler.cuh): slots of (unit, stream end), enough for
  // the entries the cursors and the compute can hold at once (units have at least one tile, the
  // cursors run kRingTiles + 1 tiles ahead) with room to spare.
  static constexpr int kQueueSlots = 4 * kRingTiles;
  static constexpr int kQueueBytes = kQueueSlots * 2 * 4;
  // Layout: stages, block-id ring, epilogue m/l, TMA barriers, unit queue, the merge list and
  // flag, then the epilogue's O
  // rows unless they fit in the stage of the unit's last tile (the other stages hold the next
  // tiles in flight).
  static constexpr int kRingOffset = kStages * kStageBytes;
  static constexpr int kMlOffset = kRingOffset + kRingBytes;
  static constexpr int kBarrierOffset = kMlOffset + kEpilogueMlBytes;
  static constexpr int kQueueOffset = kBarrierOffset + kBarrierBytes;
  // The merge items of the CTA's cut units, counted when its stream is done
  // (decode/split_merge.cuh), then a flag for those counted at once (past the list).
  static constexpr int kMergeListSlots = kThreads < 64 ? kThreads : 64;
  static constexpr int kMergeListOffset = kQueueOffset + kQueueBytes;
  static constexpr int kMergeFlagOffset = kMergeListOffset + kMergeListSlots * 4;
  static constexpr int kPipelineBytes = kMergeFlagOffset + 16;
  static constexpr bool kEpilogueInStage = kEpilogueOBytes <= kStageBytes;
  // TMA's swizzled panels need 1024-byte alignment: the kernel rounds its base up.
  static constexpr int kAlignSlack = kTma ? 1024 : 0;
  static constexpr int kSmemBytes =
      kPipelineBytes + (kEpilogueInStage ? 0 : kEpilogueOBytes) + kAlignSlack;
  // The register budget: the CTAs per SM its shared memory allows (sm_90: 228 KB, 1 KB reserved
  // per CTA; at most 4), so that registers never lower the occupancy.
  static constexpr int kSmemCtasPerSm = 233472 / (kSmemBytes + 1024);
  static constexpr int kMinCtasPerSm =
      kSmemCtasPerSm < 1 ? 1 : (kSmemCtasPerSm > 4 ? 4 : kSmemCtasPerSm);

  static_assert(kHeadDim % 16 == 0, "head size must be a multiple of 16");
  static_assert(kWarpKeys % 16 == 0, "each warp needs whole 16-key steps");
  static_assert(kIdRows <= kIdThreads, "one thread fetches each key row's block id");
  static_assert(kTma || (kBlockN * kChunks) % kThreads == 0, "whole copy passes");
  static_assert(!kTma || kChunks % 8 == 0, "TMA tiles: rows of whole 128-byte panels");
};

// The configurations each instantiation runs: 16-bit caches 64-key tiles, FP8 caches at D <= 128
// 128-key tiles (the bytes of 64 16-bit keys), 3 stages, 4 warps, one tile stream per CTA. Where
// the rows are whole 128-byte panels the tiles come by TMA (DecodeTmaConfig), else, or when the
// cache cannot be described by a tensor map, by cp.async with a block barrier per tile
// (DecodeCopyConfig); both hold the same CTAs per SM. The configurations tried and dropped are in
// docs/performance.md.
template <int kHeadDim, CacheKind kCache>
inline constexpr int kDefaultDecodeBlockN = is_fp8(kCache) && kHeadDim <= 128 ? 128 : 64;
template <int kHeadDim, CacheKind kCache>
using DecodeCopyConfig = DecodeConfig<kHeadDim, kCache, kDefaultDecodeBlockN<kHeadDim, kCache>, 3>;
template <int kHeadDim, CacheKind kCache>
using DecodeTmaConfig = DecodeConfig<kHeadDim, kCache, kDefaultDecodeBlockN<kHeadDim, kCache>, 3, 4,
                                     TileSync::kWarpTma>;
// Whether the TMA tiles serve this head size and cache (rows of whole 128-byte panels).
template <int kHeadDim, CacheKind kCache>
inline constexpr bool kDecodeTmaServes = kHeadDim*(is_fp8(kCache) ? 1 : 2) % 128 == 0;

// Everything the device needs: the caller's parameters plus values derived on the host.
struct DecodeArgs {
  DecodeAttentionParams p;
  int group = 1;         // query heads per KV head
  int block_shift = -1;  // log2(block_size) when a power of two, else -1
  int block_stride = 0;  // cache strides as 32-bit element counts (the launcher checks they fit)
  int token_stride = 0;
  int head_stride = 0;
  bool wide_copies = true;  // 16-byte copies (FP8 caches need head_size % 16 == 0 for them)
  // TileSync::kWarpTma: each plane as a tensor map (decode/mainloop_load_tma.cuh: columns, then
  // heads and tokens in memory order, block) and which coordinate is the token.
  CUtensorMap k_map;
  CUtensorMap v_map;
  int kv_token_coord = 2;
};

// The arguments of a launch, derived from validated parameters.
inline DecodeArgs make_decode_args(const DecodeAttentionParams& params) {
  DecodeArgs a;
  a.p = params;
  a.group = params.num_heads / params.num_kv_heads;
  a.block_stride = static_cast<int>(params.cache_block_stride);
  a.token_stride = static_cast<int>(params.cache_token_stride);
  a.head_stride = static_cast<int>(params.cache_head_stride);
  if (dtype_size(params.cache_dtype) == 1) {
    a.wide_copies = reinterpret_cast<uintptr_t>(params.k_cache) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(params.v_cache) % 16 == 0 &&
                    params.cache_block_stride % 16 == 0 && params.cache_token_stride % 16 == 0 &&
                    params.cache_head_stride % 16 == 0 && params.head_size % 16 == 0;
  }
  if ((params.block_size & (params.block_size - 1)) == 0) {
    a.block_shift = __builtin_ctz(static_cast<unsigned>(params.block_size));
  }
  return a;
}

}  // namespace pagedattn::kernels::decode
