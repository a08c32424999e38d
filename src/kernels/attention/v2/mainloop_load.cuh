// Global -> shared loads of the v2 paged attention kernel: the packed Q tile and the K/V tiles
// from the CTA's KV source (kv_source.cuh: the cache through the block table, or the new tokens'
// rows; FP8 tiles land raw and fp8_convert.cuh widens them). Rows past the sequence and columns
// past head_size are zero-filled by cp.async (never read), so NaN in unused cache slots cannot
// reach the MMAs.
#pragma once

#include "device/mma.cuh"
#include "kernels/attention/v2/kv_source.cuh"
#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

// Q tile: kBlockM packed rows x kHeadDim columns, 16-bit.
template <typename Cfg, typename T>
__device__ __forceinline__ void load_q_tile(const KernelArgs& a, const CtaWork& w, char* smem_q) {
  const PagedAttentionParams& p = a.p;
  const T* q = static_cast<const T*>(p.q);
  for (int idx = threadIdx.x; idx < Cfg::kBlockM * Cfg::kChunksK; idx += Cfg::kThreads) {
    const int row = idx / Cfg::kChunksK, c = idx % Cfg::kChunksK;
    const int gr = w.row0 + row;
    const bool valid = gr < w.rows && c * 8 < p.head_size;
    const T* src = q;
    if (valid) {
      const int token = w.q_start + gr / a.group;
      const int head = w.kv_head * a.group + gr % a.group;
      src = q + token * p.q_token_stride + head * p.q_head_stride + c * 8;
    }
    device::cp_async_16(device::smem_addr(smem_q + row * Cfg::kQRowBytes + c * 16), src,
                        valid ? 16 : 0);
  }
}

// The rows of a K/V tile one thread copies: 8 consecutive threads copy one key row, so a thread
// handles kBlockN / (kThreads / 8) rows.
template <typename Cfg>
struct TileRows {
  static constexpr int kRowsPerPass = Cfg::kThreads / 8;
  static constexpr int kPasses = Cfg::kBlockN / kRowsPerPass;
  __device__ __forceinline__ static int row(int pass) {
    return pass * kRowsPerPass + threadIdx.x / 8;
  }
};

// Stages the block ids of the key rows of tile `tile` (zeros unless live) into its slot of the
// shared-memory ring (cp.async, in the caller's commit group): Kv::table()[Kv::index(key)]
// (ragged: the request's first token). The kernel fetches them kStages - 1 tiles before the copy
// that needs them, so block-table reads (global memory latency) overlap compute instead of
// stalling the copy. Rows past the sequence get 0.
template <typename Cfg, typename Kv>
__device__ __forceinline__ void fetch_tile_blocks(const KernelArgs& a, const CtaWork& w, int tile,
                                                  bool live, int32_t* ring) {
  if (threadIdx.x < Cfg::kBlockN) {
    const int32_t* table = Kv::table(a, w);
    const int key = tile * Cfg::kBlockN + threadIdx.x;
    const bool ok = live && key < w.kv_len;
    device::cp_async_4(
        device::smem_addr(ring + (tile % Cfg::kTableSlots) * Cfg::kBlockN + threadIdx.x),
        ok ? table + Kv::index(a, key) : table, ok ? 4 : 0);
  }
}

// One key row's kCols columns (from column col0 of the head) in kChunk-byte copies: 8 lanes per
// row, each taking every 8th chunk. Columns at or past head_size are zero-filled, never read.
template <int kCols, int kElemBytes, int kChunk>
__device__ __forceinline__ void copy_row(char* dst, const char* src, int col0, bool row_ok,
                                         int head_size, int lane8) {
  constexpr int kElems = kChunk / kElemBytes;  // elements per chunk
  constexpr int kChunks = kCols / kElems;
#pragma unroll
  for (int c0 = 0; c0 < kChunks; c0 += 8) {
    const int c = c0 + lane8;
    if (c < kChunks) {
      const int bytes = row_ok && col0 + c * kElems < head_size ? kChunk : 0;
      if constexpr (kChunk == 16) {
        device::cp_async_16(device::smem_addr(dst + c * kChunk), src + c * kChunk, bytes);
      } else {
        device::cp_async_8(device::smem_addr(dst + c * kChunk), src + c * kChunk, bytes);
      }
    }
  }
}

// One K/V tile from the source Kv whose rows' block ids are in the ring (fetch_tile_blocks,
// completed); a tile that is not live is zero-filled without reading memory.
// 8 consecutive threads copy 8 consecutive chunks of one row (128 contiguous bytes for 16-bit
// sources). 16-bit sources land in the padded compute layout; FP8 caches land unpadded
// (kHeadDim + kDV bytes per key) and are converted by convert_fp8_rows.
template <typename Cfg, typename T, CacheKind kCache, typename Kv>
__device__ __forceinline__ void load_kv_tile(const KernelArgs& a, const CtaWork& w, int tile,
                                             bool live, const int32_t* ring, char* stage) {
  constexpr bool kFp8 = is_fp8(kCache);
  constexpr int kElemBytes = kFp8 ? 1 : 2;
  const PagedAttentionParams& p = a.p;
  const int lane8 = threadIdx.x % 8;
#pragma unroll
  for (int pass = 0; pass < TileRows<Cfg>::kPasses; ++pass) {
    const int row = TileRows<Cfg>::row(pass);
    const int key = tile * Cfg::kBlockN + row;
    const bool row_ok = live && key < w.kv_len;
    // Rows past the sequence have block 0 in the ring: a valid address, and never read.
    const int block = ring[(tile % Cfg::kTableSlots) * Cfg::kBlockN + row];
    const auto [k_src, v_src] = Kv::template rows<Cfg, kElemBytes>(a, w, block, key);
    const int v_col0 = w.dchunk * Cfg::kDV;
    if constexpr (kFp8) {
      char* raw_k = stage + row * Cfg::kHeadDim;
      char* raw_v = stage + Cfg::kBlockN * Cfg::kHeadDim + row * Cfg::kDV;
      // 16-byte copies where the cache allows them: half the requests of 8-byte ones, and FP8
      // decode is bound by requests, not bytes.
      if (a.fp8_wide_copies) {
        copy_row<Cfg::kHeadDim, 1, 16>(raw_k, k_src, 0, row_ok, p.head_size, lane8);
        copy_row<Cfg::kDV, 1, 16>(raw_v, v_src, v_col0, row_ok, p.head_size, lane8);
      } else {
        copy_row<Cfg::kHeadDim, 1, 8>(raw_k, k_src, 0, row_ok, p.head_size, lane8);
        copy_row<Cfg::kDV, 1, 8>(raw_v, v_src, v_col0, row_ok, p.head_size, lane8);
      }
    } else {
      copy_row<Cfg::kHeadDim, 2, 16>(stage + row * Cfg::kQRowBytes, k_src, 0, row_ok, p.head_size,
                                     lane8);
      copy_row<Cfg::kDV, 2, 16>(stage + Cfg::kKTileBytes + row * Cfg::kVRowBytes, v_src, v_col0,
                                row_ok, p.head_size, lane8);
    }
  }
}

}  // namespace pagedattn::kernels::attention::v2
