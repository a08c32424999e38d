// The per-warp compute of the decode kernel: S = Q K^T over the warp's keys of a tile, the online
// softmax, and O += P V with P kept in registers. 16-bit caches use ldmatrix fragments as usual;
// FP8 caches are converted in registers from FP8 fragments (device/fragments_fp8.cuh) and run
// f16 MMAs. Fragment layouts: PTX "Matrix Fragments for mma.m16n8k16".
#pragma once

#include "device/convert.cuh"
#include "device/fragments_fp8.cuh"
#include "device/mma.cuh"
#include "kernels/decode/score_mask.cuh"

namespace pagedattn::kernels::decode {

template <typename Cfg>
struct WarpState {
  float o[2 * Cfg::kKSteps][4];  // unnormalized output, C fragments of n8 tiles
  float m[2];                    // running max (base 2) of rows g and g + 8
  float l[2];                    // this thread's part of the row sums
};

// Column of output element i of n8 tile dt held by this lane (rows: g + 8 * (i / 2)).
template <typename Cfg>
__device__ __forceinline__ int out_column(int dt, int i, int lane) {
  const int t = lane % 4;
  if constexpr (Cfg::kFp8) {
    return 16 * (dt / 2) + 4 * t + 2 * (i & 1) + (dt & 1);
  } else {
    return 8 * dt + 2 * t + (i & 1);
  }
}

template <typename Cfg>
__device__ __forceinline__ constexpr device::Fp8Format fp8_format() {
  return Cfg::kCache == CacheKind::kFp8E5M2 ? device::Fp8Format::kE5M2 : device::Fp8Format::kE4M3;
}

// One FP8 K register (4 bytes of key g for one k16 step) into the S fragment.
template <typename Cfg>
__device__ __forceinline__ void mma_fp8_k(float (&s)[4], const uint32_t (&qa)[4], uint32_t r) {
  uint32_t b0, b1;
  device::fp8x4_to_f16x2x2<fp8_format<Cfg>()>(r, b0, b1);
  device::mma_16816<__half>(s, qa, b0, b1);
}

template <typename Cfg, typename T>
__device__ __forceinline__ void compute_scores(float (&s)[Cfg::kWarpKeys / 8][4],
                                               const uint32_t (&qa)[Cfg::kKSteps][4],
                                               uint32_t k_smem, int warp_key0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < Cfg::kWarpKeys / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
  if constexpr (Cfg::kFp8) {
#pragma unroll
    for (int nt = 0; nt < Cfg::kWarpKeys / 8; ++nt) {
      const int key = warp_key0 + nt * 8 + lane % 8;
      int kk = 0;
#pragma unroll
      for (; kk + 4 <= Cfg::kKSteps; kk += 4) {
        uint32_t r[4];
        device::ldmatrix_x4(r, k_smem + tile_chunk_offset<Cfg>(key, kk + lane / 8));
#pragma unroll
        for (int i = 0; i < 4; ++i) mma_fp8_k<Cfg>(s[nt], qa[kk + i], r[i]);
      }
      if constexpr (Cfg::kKSteps % 4 >= 2) {
        uint32_t r[2];
        device::ldmatrix_x2(r, k_smem + tile_chunk_offset<Cfg>(key, kk + (lane / 8) % 2));
        mma_fp8_k<Cfg>(s[nt], qa[kk], r[0]);
        mma_fp8_k<Cfg>(s[nt], qa[kk + 1], r[1]);
        kk += 2;
      }
      if constexpr (Cfg::kKSteps % 2 == 1) {
        uint32_t r;
        device::ldmatrix_x1(r, k_smem + tile_chunk_offset<Cfg>(key, kk));
        mma_fp8_k<Cfg>(s[nt], qa[kk], r);
      }
    }
  } else {
#pragma unroll
    for (int np = 0; np < Cfg::kWarpKeys / 16; ++np) {
      const int key = warp_key0 + np * 16 + lane % 8 + 8 * (lane / 16);
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
        uint32_t kb[4];
        device::ldmatrix_x4(kb, k_smem + tile_chunk_offset<Cfg>(key, 2 * kk + (lane / 8) % 2));
        device::mma_16816<T>(s[2 * np], qa[kk], kb[0], kb[1]);
        device::mma_16816<T>(s[2 * np + 1], qa[kk], kb[2], kb[3]);
      }
    }
  }
}

// How far (base 2) a row's max may rise above the reference before O and l are rescaled: exact
// either way (O, l and the LSE share the reference); it bounds P <= 2^8 (fine for f16 and bf16)
// and lets most tiles skip the rescale once the maxima settle.
constexpr float kRescaleSlack = 8.0f;

template <typename Cfg>
__device__ __forceinline__ void online_softmax(float (&s)[Cfg::kWarpKeys / 8][4],
                                               WarpState<Cfg>& st, float c) {
  constexpr int kNT = Cfg::kWarpKeys / 8;
  float tile_max[2];
  bool grows = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    tile_max[h] = mx * c;
    grows |= tile_max[h] > st.m[h] + kRescaleSlack;
  }
  if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(st.m[h], tile_max[h]);
      // A row that has seen nothing keeps m = -inf: alpha = exp2(-inf) = 0, never NaN.
      const float alpha = device::fast_exp2(st.m[h] - (m_new == -INFINITY ? 0.0f : m_new));
      st.m[h] = m_new;
      st.l[h] *= alpha;
#pragma unroll
      for (int dt = 0; dt < 2 * Cfg::kKSteps; ++dt) {
        st.o[dt][2 * h] *= alpha;
        st.o[dt][2 * h + 1] *= alpha;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_use = st.m[h] == -INFINITY ? 0.0f : st.m[h];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      s[nt][2 * h] = device::fast_exp2(fmaf(s[nt][2 * h], c, -m_use));
      s[nt][2 * h + 1] = device::fast_exp2(fmaf(s[nt][2 * h + 1], c, -m_use));
      st.l[h] += s[nt][2 * h] + s[nt][2 * h + 1];
    }
  }
}

// Even and odd output columns of one 16-column FP8 V chunk: lo_keys / hi_keys are the
// trans-loaded registers of keys 0-7 and 8-15 of the k16 step.
template <typename Cfg>
__device__ __forceinline__ void mma_fp8_v(float (&o_even)[4], float (&o_odd)[4],
                                          const uint32_t (&pa)[4], uint32_t lo_keys,
                                          uint32_t hi_keys) {
  uint32_t b0_even, b0_odd, b1_even, b1_odd;
  device::fp8x4_to_f16x2x2<fp8_format<Cfg>()>(device::fp8_pair_columns(lo_keys), b0_even, b0_odd);
  device::fp8x4_to_f16x2x2<fp8_format<Cfg>()>(device::fp8_pair_columns(hi_keys), b1_even, b1_odd);
  device::mma_16816<__half>(o_even, pa, b0_even, b1_even);
  device::mma_16816<__half>(o_odd, pa, b0_odd, b1_odd);
}

template <typename Cfg, typename T>
__device__ __forceinline__ void accumulate_pv(const float (&s)[Cfg::kWarpKeys / 8][4],
                                              WarpState<Cfg>& st, uint32_t v_smem,
                                              int warp_key0) {
  using P = std::conditional_t<Cfg::kFp8, __half, T>;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < Cfg::kWarpKeys / 16; ++j) {
    uint32_t pa[4];
    pa[0] = device::pack_float2<P>(s[2 * j][0], s[2 * j][1]);
    pa[1] = device::pack_float2<P>(s[2 * j][2], s[2 * j][3]);
    pa[2] = device::pack_float2<P>(s[2 * j + 1][0], s[2 * j + 1][1]);
    pa[3] = device::pack_float2<P>(s[2 * j + 1][2], s[2 * j + 1][3]);
    if constexpr (Cfg::kFp8) {
      const int key = warp_key0 + 16 * j + lane % 8 + 8 * ((lane / 8) % 2);
      int c = 0;
#pragma unroll
      for (; c + 2 <= Cfg::kKSteps; c += 2) {
        uint32_t r[4];
        device::ldmatrix_x4_trans(r, v_smem + tile_chunk_offset<Cfg>(key, c + lane / 16));
        mma_fp8_v<Cfg>(st.o[2 * c], st.o[2 * c + 1], pa, r[0], r[1]);
        mma_fp8_v<Cfg>(st.o[2 * c + 2], st.o[2 * c + 3], pa, r[2], r[3]);
      }
      if constexpr (Cfg::kKSteps % 2 == 1) {
        uint32_t r[2];
        device::ldmatrix_x2_trans(r, v_smem + tile_chunk_offset<Cfg>(key, c));
        mma_fp8_v<Cfg>(st.o[2 * c], st.o[2 * c + 1], pa, r[0], r[1]);
      }
    } else {
      const int key = warp_key0 + 16 * j + lane % 16;
#pragma unroll
      for (int dp = 0; dp < Cfg::kKSteps; ++dp) {
        uint32_t vb[4];
        device::ldmatrix_x4_trans(vb, v_smem + tile_chunk_offset<Cfg>(key, 2 * dp + lane / 16));
        device::mma_16816<T>(st.o[2 * dp], pa, vb[0], vb[1]);
        device::mma_16816<T>(st.o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
  }
}

}  // namespace pagedattn::kernels::decode
