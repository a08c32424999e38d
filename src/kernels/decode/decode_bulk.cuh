// K/V tiles through the bulk copy engine (cp.async.bulk, one copy per key row, completing on one
// mbarrier per stage) instead of 16-byte cp.async: one warp issues a tile, so the bytes in
// flight no longer depend on the threads' copy queues. Rows outside the unit copy the tile's
// first key row instead (finite; the mask gives them weight 0). Whole rows only: the stream
// takes the 16-byte copies for other head sizes and for rows not 16-byte aligned.
#pragma once

#include "kernels/decode/decode_loads.cuh"

namespace pagedattn::kernels::decode {

__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" ::"r"(device::smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(device::smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(device::smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Orders this thread's ordinary shared-memory accesses before later bulk copies into them.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, int bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(device::smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(device::smem_addr(bar))
      : "memory");
}

// Warp 0 issues tile `tile` (block ids in ring slot `slot`) into `stage`, completing on `bar`.
template <typename Cfg>
__device__ __forceinline__ void bulk_load_kv_tile(const DecodeArgs& a, const UnitWork& w, int tile,
                                                  const int32_t* ring, int slot, char* stage,
                                                  uint64_t* bar) {
  constexpr int kRowCopy = Cfg::kHeadDim * Cfg::kElemBytes;
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  if (lane == 0) mbar_arrive_expect_tx(bar, 2 * Cfg::kBlockN * kRowCopy);
  const char* cache = static_cast<const char*>(a.p.kv_cache);
  const int32_t* ids = ring + slot * Cfg::kBlockN;
  const int key0 = tile * Cfg::kBlockN;
  const int first_row = max(w.kv_begin - key0, 0);  // the tile's first key of the unit
  for (int row = lane; row < Cfg::kBlockN; row += 32) {
    const int key = key0 + row;
    const bool ok = key >= w.kv_begin && key < w.kv_end;
    const int src_row = ok ? row : first_row;
    const char* k_src = cache + key_row_offset<Cfg>(a, w, ids, src_row, key0 + src_row);
    char* k_dst = stage + row * Cfg::kRowBytes;
    bulk_copy(k_dst, k_src, kRowCopy, bar);
    bulk_copy(k_dst + Cfg::kTileBytes, k_src + static_cast<int64_t>(a.kv_stride) * Cfg::kElemBytes,
              kRowCopy, bar);
  }
}

}  // namespace pagedattn::kernels::decode
