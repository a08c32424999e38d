// FP8 -> 16-bit conversion of a K/V tile in shared memory for the v2 paged attention kernel: the
// raw tile that v2/mainloop_load.cuh copied becomes the padded compute layout the MMAs read.
#pragma once

#include "device/fp8.cuh"
#include "kernels/attention/v2/traits.cuh"

namespace pagedattn::kernels::attention::v2 {

// FP8 raw tile -> 16-bit compute tile (exact; the scales are applied to scores and outputs), for
// key rows [row0, row0 + kRows), by `lanes` threads of which this is `lane`.
template <typename Cfg, typename T, CacheKind kCache, int kRows>
__device__ __forceinline__ void convert_fp8_rows(const char* raw, char* tile, int row0, int lane,
                                                 int lanes) {
  constexpr device::Fp8Format kFormat =
      kCache == CacheKind::kFp8E4M3 ? device::Fp8Format::kE4M3 : device::Fp8Format::kE5M2;
  constexpr int kChunksRow = Cfg::kChunksK + Cfg::kChunksV;
  for (int idx = lane; idx < kRows * kChunksRow; idx += lanes) {
    const int row = row0 + idx / kChunksRow;
    int c = idx % kChunksRow;
    const bool is_v = c >= Cfg::kChunksK;
    if (is_v) c -= Cfg::kChunksK;
    const int src =
        is_v ? Cfg::kBlockN * Cfg::kHeadDim + row * Cfg::kDV + c * 8 : row * Cfg::kHeadDim + c * 8;
    const int dst =
        is_v ? Cfg::kKTileBytes + row * Cfg::kVRowBytes + c * 16 : row * Cfg::kQRowBytes + c * 16;
    const uint2 bytes = *reinterpret_cast<const uint2*>(raw + src);
    uint4 out;
    out.x = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.x & 0xFFFF));
    out.y = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.x >> 16));
    out.z = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.y & 0xFFFF));
    out.w = device::fp8x2_to_half2<T, kFormat>(static_cast<uint16_t>(bytes.y >> 16));
    *reinterpret_cast<uint4*>(tile + dst) = out;
  }
}

}  // namespace pagedattn::kernels::attention::v2
