// S = Q K^T on FP8 tensor cores for FP8 caches (mma.sync m16n8k32, e4m3 x e4m3/e5m2): the K
// tile's bytes go from ldmatrix straight into the B operand, with no conversion. The query is
// split into two e4m3 terms, Q = hi + lo (lo = e4m3(Q - hi)), about as precise as bf16, after a
// power-of-two scale per row that puts the row's largest |q| in [128, 256) (e4m3 reaches 448);
// the scores are unscaled after the MMAs. Needs head sizes that are multiples of 32.
//
// Fragments (PTX "Matrix Fragments for mma.m16n8k32", 8-bit types; g = lane / 4, t = lane % 4):
// A register 0/1 = rows g / g + 8, k 4t..4t+3; registers 2/3 the same at k + 16. B register 0 =
// k 4t..4t+3 of column (key) g, register 1 at k + 16: ldmatrix (b16) of 8 key rows x 16 bytes
// gives lane l exactly the bytes 4t..4t+3 of key g.
#pragma once

#include "device/convert.cuh"
#include "device/fragments_fp8.cuh"
#include "kernels/decode/decode_compute.cuh"

namespace pagedattn::kernels::decode {

template <device::Fp8Format kK>
__device__ __forceinline__ void mma_16832_fp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1) {
  if constexpr (kK == device::Fp8Format::kE4M3) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats to two e4m3 bytes (x0 in the low byte), rounded to nearest, saturating.
__device__ __forceinline__ uint32_t float2_to_e4m3x2(float x0, float x1) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(x1), "f"(x0));
  return r;
}

// Four scaled query values to their hi and lo e4m3 terms (4 bytes each, x[0] lowest).
__device__ __forceinline__ void split_e4m3x4(const float (&x)[4], uint32_t& hi, uint32_t& lo) {
  hi = float2_to_e4m3x2(x[0], x[1]) | float2_to_e4m3x2(x[2], x[3]) << 16;
  uint32_t back01, back23;
  device::fp8x4_to_f16x2x2<device::Fp8Format::kE4M3>(hi, back01, back23);
  const float2 b01 = device::unpack_float2<__half>(back01);
  const float2 b23 = device::unpack_float2<__half>(back23);
  const uint32_t lo01 = float2_to_e4m3x2(x[0] - b01.x, x[1] - b01.y);
  const uint32_t lo23 = float2_to_e4m3x2(x[2] - b23.x, x[3] - b23.y);
  lo = lo01 | lo23 << 16;
}

// Four query values of row `row` (nullptr: an invalid row) at column col, times the softmax
// scale; zero past head_size (head sizes are multiples of 8, so 4-column groups are whole).
template <typename T>
__device__ __forceinline__ void load_q4(const DecodeAttentionParams& p, const T* row, int col,
                                        float (&x)[4]) {
  uint2 v = make_uint2(0u, 0u);
  if (row != nullptr && col < p.head_size) v = *reinterpret_cast<const uint2*>(row + col);
  const float2 x01 = device::unpack_float2<T>(v.x), x23 = device::unpack_float2<T>(v.y);
  x[0] = x01.x * p.scale;
  x[1] = x01.y * p.scale;
  x[2] = x23.x * p.scale;
  x[3] = x23.y * p.scale;
}

// qa[2 kk] / qa[2 kk + 1]: the hi / lo A operands of k32 step kk; inv_scale: rows g, g + 8.
template <typename Cfg, typename T>
__device__ __forceinline__ void load_q_fp8_mma(const DecodeArgs& a, const UnitWork& w,
                                               uint32_t (&qa)[Cfg::kKSteps][4],
                                               float (&inv_scale)[2]) {
  static_assert(Cfg::kHeadDim % 32 == 0, "k32 steps");
  const DecodeAttentionParams& p = a.p;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const int gr = w.row0 + r;
    const T* row = nullptr;
    if (r < w.rows) {
      row = static_cast<const T*>(p.q) + (w.q_start + gr / a.group) * p.q_token_stride +
            (w.kv_head * a.group + gr % a.group) * p.q_head_stride;
    }
    // Pass 1: the row's largest |q| (its four lanes t); pass 2 (L1 hits) quantizes.
    float mx = 0.0f;
#pragma unroll
    for (int c = 0; c < Cfg::kHeadDim / 16; ++c) {
      float x[4];
      load_q4<T>(p, row, 16 * c + 4 * t, x);
#pragma unroll
      for (int i = 0; i < 4; ++i) mx = fmaxf(mx, fabsf(x[i]));
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // 2^k with k = 7 - floor(log2 mx); rows of zeros (or subnormal maxima) keep k = 0.
    const int e = static_cast<int>((__float_as_uint(mx) >> 23) & 0xFFu);
    const int k = e == 0 ? 0 : min(126, max(-126, 7 - (e - 127)));
    const float scale = __uint_as_float(static_cast<uint32_t>(k + 127) << 23);
    inv_scale[h] = __uint_as_float(static_cast<uint32_t>(127 - k) << 23);
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 32; ++kk) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float x[4];
        load_q4<T>(p, row, 32 * kk + 16 * half + 4 * t, x);
#pragma unroll
        for (int i = 0; i < 4; ++i) x[i] *= scale;
        split_e4m3x4(x, qa[2 * kk][h + 2 * half], qa[2 * kk + 1][h + 2 * half]);
      }
    }
  }
}

template <typename Cfg>
__device__ __forceinline__ void qk_step_fp8(float (&s)[4], const uint32_t (&qa)[Cfg::kKSteps][4],
                                            int kk, uint32_t b0, uint32_t b1) {
  mma_16832_fp8<fp8_format<Cfg>()>(s, qa[2 * kk], b0, b1);
  mma_16832_fp8<fp8_format<Cfg>()>(s, qa[2 * kk + 1], b0, b1);
}

template <typename Cfg>
__device__ __forceinline__ void compute_scores_fp8_mma(float (&s)[Cfg::kWarpKeys / 8][4],
                                                       const uint32_t (&qa)[Cfg::kKSteps][4],
                                                       const float (&inv_scale)[2], uint32_t k_smem,
                                                       int warp_key0) {
  constexpr int kSteps = Cfg::kHeadDim / 32;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < Cfg::kWarpKeys / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
    const uint32_t row = k_smem + (warp_key0 + nt * 8 + lane % 8) * Cfg::kRowBytes;
    int kk = 0;
#pragma unroll
    for (; kk + 2 <= kSteps; kk += 2) {
      uint32_t r[4];
      device::ldmatrix_x4(r, row + (2 * kk + lane / 8) * 16);
      qk_step_fp8<Cfg>(s[nt], qa, kk, r[0], r[1]);
      qk_step_fp8<Cfg>(s[nt], qa, kk + 1, r[2], r[3]);
    }
    if constexpr (kSteps % 2 == 1) {
      uint32_t r[2];
      device::ldmatrix_x2(r, row + (2 * kk + (lane / 8) % 2) * 16);
      qk_step_fp8<Cfg>(s[nt], qa, kk, r[0], r[1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) s[nt][i] *= inv_scale[i / 2];
  }
}

}  // namespace pagedattn::kernels::decode
