// Global loads of the decode kernel: the query tile straight into MMA fragments, the block ids of
// each KV tile's key rows (staged ahead through a shared-memory ring) and the K/V tiles
// (cp.async, 16 bytes per copy). Keys outside the unit's range and columns past head_size are
// zero-filled without reading memory, so NaN in unused cache slots never reaches the MMAs.
#pragma once

#include "device/convert.cuh"
#include "device/mma.cuh"
#include "kernels/decode/traits.cuh"

namespace pagedattn::kernels::decode {

// The unit a CTA runs, unpacked.
struct UnitWork {
  int req;
  int q_start;
  int q_len;
  int kv_len;
  int kv_head;
  int row0;
  int rows;  // packed rows of this tile (<= 16)
  int kv_begin;
  int kv_end;
  int partial;  // first partial row, or -1
};

__device__ __forceinline__ UnitWork load_unit(const DecodeWorkUnit* units, int index, int group) {
  const int4* src = reinterpret_cast<const int4*>(units + index);
  const int4 lo = src[0], hi = src[1];
  UnitWork w;
  w.req = lo.x;
  w.q_start = lo.y;
  w.q_len = lo.z;
  w.kv_len = lo.w;
  w.kv_head = hi.x >> 16;
  w.row0 = hi.x & 0xFFFF;
  w.rows = min(kDecodeRowsPerTile, w.q_len * group - w.row0);
  w.kv_begin = hi.y;
  w.kv_end = hi.z;
  w.partial = hi.w;
  return w;
}

// Query fragments (A operand, 16 rows x kHeadDim) of every k16 step, in registers for the whole
// unit. 16-bit caches: the plain m16n8k16 layout, T as given. FP8 caches: the k order permuted as
// the FP8 K fragments are (fragments_fp8.cuh): lane t's registers hold columns 4t..4t+3 of each
// 16-column step, as T until scale_q_fragments makes them f16 pre-multiplied by the softmax
// scale. Plain loads with no use: they stay in flight until the unit's first product.
template <typename Cfg, typename T>
__device__ __forceinline__ void load_q_fragments(const DecodeArgs& a, const UnitWork& w,
                                                 uint32_t (&qa)[Cfg::kKSteps][4]) {
  const DecodeAttentionParams& p = a.p;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const bool valid = r < w.rows;
    const int gr = w.row0 + r;
    const T* row = static_cast<const T*>(p.q);
    if (valid) {
      row += (w.q_start + gr / a.group) * p.q_token_stride +
             (w.kv_head * a.group + gr % a.group) * p.q_head_stride;
    }
#pragma unroll
    for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
      if constexpr (Cfg::kFp8) {
        const int col = 16 * kk + 4 * t;
        uint2 v = make_uint2(0u, 0u);
        if (valid && col < p.head_size) v = *reinterpret_cast<const uint2*>(row + col);
        qa[kk][h] = v.x;
        qa[kk][2 + h] = v.y;
      } else {
        const int col = 16 * kk + 2 * t;
        const bool lo_ok = valid && col < p.head_size, hi_ok = valid && col + 8 < p.head_size;
        qa[kk][h] = lo_ok ? *reinterpret_cast<const uint32_t*>(row + col) : 0u;
        qa[kk][2 + h] = hi_ok ? *reinterpret_cast<const uint32_t*>(row + col + 8) : 0u;
      }
    }
  }
}

// FP8 caches: the loaded fragments (T pairs) to f16 pre-multiplied by the softmax scale.
template <typename Cfg, typename T>
__device__ __forceinline__ void scale_q_fragments(const DecodeArgs& a,
                                                  uint32_t (&qa)[Cfg::kKSteps][4]) {
  if constexpr (Cfg::kFp8) {
#pragma unroll
    for (int kk = 0; kk < Cfg::kKSteps; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x = device::unpack_float2<T>(qa[kk][i]);
        qa[kk][i] = device::pack_float2<__half>(x.x * a.p.scale, x.y * a.p.scale);
      }
  }
}

__device__ __forceinline__ int key_block(const DecodeArgs& a, int key) {
  return a.block_shift >= 0 ? key >> a.block_shift : key / a.p.block_size;
}
__device__ __forceinline__ int key_slot(const DecodeArgs& a, int key) {
  return a.block_shift >= 0 ? key & (a.p.block_size - 1) : key % a.p.block_size;
}

// Block ids of tile `tile`'s key rows into ring slot `slot` (cp.async, in the caller's group);
// rows outside the unit get 0. The CTA fetches the whole tile's (cp.async tiles), each warp its
// own keys' (TMA tiles: the warp waits for nobody else).
template <typename Cfg>
__device__ __forceinline__ void fetch_block_ids(const DecodeArgs& a, const UnitWork& w, int tile,
                                                bool live, int32_t* ring, int slot) {
  const int id_thread = Cfg::kTma ? threadIdx.x % 32 : threadIdx.x;
  const int row = (Cfg::kTma ? (threadIdx.x / 32) * Cfg::kWarpKeys : 0) + id_thread;
  if (id_thread < Cfg::kIdRows) {
    const int32_t* table = a.p.block_table + static_cast<int64_t>(w.req) * a.p.block_table_stride;
    const int key = tile * Cfg::kBlockN + row;
    const bool ok = live && key >= w.kv_begin && key < w.kv_end;
    device::cp_async_4(device::smem_addr(ring + slot * Cfg::kBlockN + row),
                       ok ? table + key_block(a, key) : table, ok ? 4 : 0);
  }
}

// 16-byte global -> shared copy (zero-filled past src_bytes; 0 reads nothing) whose L2 miss
// fetches 128 bytes around it: a 256-byte fetch of a 128-byte FP8 NHD row also reads the next
// head's row, and even 256-byte bf16 rows read faster with 128 (docs/performance.md).
__device__ __forceinline__ void cp_async_16_l2_128(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// Shared-memory byte offset of 16-byte chunk `chunk` of row `row` (< 16) of a TMA box: panels
// of 16 rows x 128 bytes, chunk c of row r stored at c ^ (r % 8) (the 128-byte swizzle).
template <typename Cfg>
__device__ __forceinline__ int box_chunk_offset(int row, int chunk) {
  return (chunk / 8) * Cfg::kPanelBytes + row * 128 + ((chunk % 8) ^ (row % 8)) * 16;
}

// Shared-memory byte offset of 16-byte chunk `chunk` of key row `row` of a K or V tile: padded
// rows (cp.async) or the boxes of 16 keys (TMA; the warps' slices are consecutive boxes).
template <typename Cfg>
__device__ __forceinline__ int tile_chunk_offset(int row, int chunk) {
  if constexpr (Cfg::kTma) {
    return (row / 16) * Cfg::kBoxBytes + box_chunk_offset<Cfg>(row % 16, chunk);
  } else {
    return row * Cfg::kRowBytes + chunk * 16;
  }
}

// Byte offset of key `key`'s K row of the unit's head in the cache (its block id from `ids`).
template <typename Cfg>
__device__ __forceinline__ int64_t key_row_offset(const DecodeArgs& a, const UnitWork& w,
                                                  const int32_t* ids, int row, int key) {
  return (static_cast<int64_t>(ids[row]) * a.block_stride + key_slot(a, key) * a.token_stride +
          w.kv_head * a.head_stride) *
         Cfg::kElemBytes;
}

// K and V rows of tile `tile` into a stage (rows of kRowBytes; K then V). Consecutive threads
// copy consecutive 16-byte chunks of a row.
template <typename Cfg>
__device__ __forceinline__ void load_kv_tile(const DecodeArgs& a, const UnitWork& w, int tile,
                                             bool live, const int32_t* ring, int slot,
                                             char* stage) {
  const char* k_cache = static_cast<const char*>(a.p.k_cache);
  const char* v_cache = static_cast<const char*>(a.p.v_cache);
  const int32_t* ids = ring + slot * Cfg::kBlockN;
  constexpr int kPasses = Cfg::kBlockN * Cfg::kChunks / Cfg::kThreads;
  constexpr int kElemsPerChunk = 16 / Cfg::kElemBytes;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int idx = pass * Cfg::kThreads + threadIdx.x;
    const int row = idx / Cfg::kChunks, c = idx % Cfg::kChunks;
    const int key = tile * Cfg::kBlockN + row;
    const bool ok = live && key >= w.kv_begin && key < w.kv_end;
    const int64_t offset = key_row_offset<Cfg>(a, w, ids, row, key);
    const char* k_src = k_cache + offset;
    const char* v_src = v_cache + offset;
    char* k_dst = stage + row * Cfg::kRowBytes + c * 16;
    char* v_dst = k_dst + Cfg::kTileBytes;
    const int col = c * kElemsPerChunk;
    if (!Cfg::kFp8 || a.wide_copies) {
      const int bytes = ok && col < a.p.head_size ? 16 : 0;
      cp_async_16_l2_128(device::smem_addr(k_dst), k_src + c * 16, bytes);
      cp_async_16_l2_128(device::smem_addr(v_dst), v_src + c * 16, bytes);
    } else {  // FP8 rows only 8-byte aligned, or head_size % 16 == 8
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int bytes = ok && col + 8 * half < a.p.head_size ? 8 : 0;
        device::cp_async_8(device::smem_addr(k_dst + 8 * half), k_src + c * 16 + 8 * half, bytes);
        device::cp_async_8(device::smem_addr(v_dst + 8 * half), v_src + c * 16 + 8 * half, bytes);
      }
    }
  }
}

}  // namespace pagedattn::kernels::decode
