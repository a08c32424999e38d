// Global -> shared loads of the paged attention kernel: the packed Q tile and the K/V tiles read
// through the block table. Rows past the sequence and columns past head_size are zero-filled by
// cp.async (never read), so NaN in unused cache slots cannot reach the MMAs.
#pragma once

#include "device/fp8.cuh"
#include "device/mma.cuh"
#include "kernels/attention/paged_attention_traits.cuh"

namespace pagedattn::kernels::attention {

// Where one CTA works: request, split, KV head, rows and the key range of its split.
struct CtaWork {
  int req;
  int split;
  int kv_head;
  int dchunk;
  int q_start;   // first token of the request
  int q_len;
  int kv_len;    // keys of the request (seqused_k)
  int rows;      // q_len * group packed rows
  int row0;      // first packed row of this CTA
  int ctx;       // kv_len - q_len: position of the first new token
};

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

// Physical row of key `key` of the CTA's request: block table lookup, once per row and tile.
// Power-of-two block sizes (the common case) avoid the integer division.
__device__ __forceinline__ int64_t key_row_offset(const PagedAttentionParams& p,
                                                  const int32_t* table, int key) {
  int block_idx, offset;
  if ((p.block_size & (p.block_size - 1)) == 0) {
    const int shift = __ffs(p.block_size) - 1;
    block_idx = key >> shift;
    offset = key & (p.block_size - 1);
  } else {
    block_idx = key / p.block_size;
    offset = key - block_idx * p.block_size;
  }
  return static_cast<int64_t>(table[block_idx]) * p.cache_block_stride +
         static_cast<int64_t>(offset) * p.cache_token_stride;
}

// One K/V tile (keys n0..n0+kBlockN-1). 8 consecutive threads copy 8 consecutive chunks of one
// row (128 contiguous bytes for 16-bit caches), so each thread resolves only kBlockN/16 rows.
// 16-bit caches land in the padded compute layout; FP8 caches land unpadded (kHeadDim + kDV
// bytes per key) and are converted by convert_fp8_tile.
template <typename Cfg, typename T, CacheKind kCache>
__device__ __forceinline__ void load_kv_tile(const KernelArgs& a, const CtaWork& w, int n0,
                                             char* stage) {
  constexpr bool kFp8 = kCache != CacheKind::kSame;
  constexpr int kElemBytes = kFp8 ? 1 : 2;
  constexpr int kRowsPerPass = Cfg::kThreads / 8;
  const PagedAttentionParams& p = a.p;
  const char* cache = static_cast<const char*>(p.kv_cache);
  const int32_t* table = p.block_table + static_cast<int64_t>(w.req) * p.block_table_stride;
  const int64_t head_off = static_cast<int64_t>(w.kv_head) * p.cache_head_stride;
  const int v_col0 = w.dchunk * Cfg::kDV;
  const int lane8 = threadIdx.x % 8;
#pragma unroll
  for (int pass = 0; pass < Cfg::kBlockN / kRowsPerPass; ++pass) {
    const int row = pass * kRowsPerPass + threadIdx.x / 8;
    const int key = n0 + row;
    const bool row_ok = key < w.kv_len;
    const int64_t base = row_ok ? key_row_offset(p, table, key) + head_off : 0;
    const char* k_src = cache + base * kElemBytes;
    const char* v_src = cache + (base + p.cache_kv_stride + v_col0) * kElemBytes;
#pragma unroll
    for (int c0 = 0; c0 < Cfg::kChunksK; c0 += 8) {
      const int c = c0 + lane8;
      if (c < Cfg::kChunksK) {
        const bool ok = row_ok && c * 8 < p.head_size;
        const char* src = ok ? k_src + c * 8 * kElemBytes : cache;
        if constexpr (kFp8) {
          device::cp_async_8(device::smem_addr(stage + row * Cfg::kHeadDim + c * 8), src,
                             ok ? 8 : 0);
        } else {
          device::cp_async_16(device::smem_addr(stage + row * Cfg::kQRowBytes + c * 16), src,
                              ok ? 16 : 0);
        }
      }
    }
#pragma unroll
    for (int c0 = 0; c0 < Cfg::kChunksV; c0 += 8) {
      const int c = c0 + lane8;
      if (c < Cfg::kChunksV) {
        const bool ok = row_ok && v_col0 + c * 8 < p.head_size;
        const char* src = ok ? v_src + c * 8 * kElemBytes : cache;
        if constexpr (kFp8) {
          device::cp_async_8(device::smem_addr(stage + Cfg::kBlockN * Cfg::kHeadDim +
                                               row * Cfg::kDV + c * 8),
                             src, ok ? 8 : 0);
        } else {
          device::cp_async_16(device::smem_addr(stage + Cfg::kKTileBytes + row * Cfg::kVRowBytes +
                                                c * 16),
                              src, ok ? 16 : 0);
        }
      }
    }
  }
}

// FP8 raw tile -> 16-bit compute tile (exact; the scales are applied to scores and outputs).
template <typename Cfg, typename T, CacheKind kCache>
__device__ __forceinline__ void convert_fp8_tile(const char* raw, char* tile) {
  constexpr device::Fp8Format kFormat =
      kCache == CacheKind::kFp8E4M3 ? device::Fp8Format::kE4M3 : device::Fp8Format::kE5M2;
  constexpr int kChunksRow = Cfg::kChunksK + Cfg::kChunksV;
  for (int idx = threadIdx.x; idx < Cfg::kBlockN * kChunksRow; idx += Cfg::kThreads) {
    const int row = idx / kChunksRow;
    int c = idx % kChunksRow;
    const bool is_v = c >= Cfg::kChunksK;
    if (is_v) c -= Cfg::kChunksK;
    const int src = is_v ? Cfg::kBlockN * Cfg::kHeadDim + row * Cfg::kDV + c * 8
                         : row * Cfg::kHeadDim + c * 8;
    const int dst = is_v ? Cfg::kKTileBytes + row * Cfg::kVRowBytes + c * 16
                         : row * Cfg::kQRowBytes + c * 16;
    const uint2 bytes = *reinterpret_cast<const uint2*>(raw + src);
    uint4 out;
    out.x = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.x & 0xFFFF));
    out.y = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.x >> 16));
    out.z = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.y & 0xFFFF));
    out.w = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.y >> 16));
    *reinterpret_cast<uint4*>(tile + dst) = out;
  }
}

}  // namespace pagedattn::kernels::attention
