// Epilogue of the v2 paged attention kernel: every warp parks its (m, l, unnormalized O) in shared
// memory; the CTA then merges the kWarpsN key slices of each row, adds the sink (unsplit launches
// only: with splits the combine adds it once), normalizes and writes either the final output and
// LSE or the split partials, with coalesced stores.
#pragma once

#include <cmath>

#include "device/convert.cuh"
#include "kernels/attention/v2/accumulator.cuh"
#include "kernels/attention/v2/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v2 {

template <typename Cfg, typename T>
__device__ __forceinline__ void store_output(const KernelArgs& a, const CtaWork& w,
                                             const WarpAccum<Cfg>& acc, float v_scale,
                                             char* smem) {
  const PagedAttentionParams& p = a.p;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;
  float* o_smem = reinterpret_cast<float*>(smem);  // [kWarpsN][kBlockM][kORowFloats]
  float* m_smem = o_smem + Cfg::kWarpsN * Cfg::kBlockM * Cfg::kORowFloats;  // [kWarpsN][kBlockM]
  float* l_smem = m_smem + Cfg::kWarpsN * Cfg::kBlockM;

#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = (wm * Cfg::kMT + mt) * 16 + lane / 4 + 8 * h;
      float l = acc.l[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      float* o_row = o_smem + (wn * Cfg::kBlockM + row) * Cfg::kORowFloats;
#pragma unroll
      for (int dt = 0; dt < Cfg::kDV / 8; ++dt) {
        *reinterpret_cast<float2*>(o_row + dt * 8 + 2 * (lane % 4)) =
            make_float2(acc.o[mt][dt][2 * h], acc.o[mt][dt][2 * h + 1]);
      }
      if (lane % 4 == 0) {
        m_smem[wn * Cfg::kBlockM + row] = acc.m2[mt][h];
        l_smem[wn * Cfg::kBlockM + row] = l;
      }
    }
  __syncthreads();

  const bool apply_sinks = p.sinks != nullptr && !a.write_split;
  constexpr int kGroups = Cfg::kDV / 4;  // 4 columns per item
  const int col_base = w.dchunk * Cfg::kDV;
  for (int idx = threadIdx.x; idx < Cfg::kBlockM * kGroups; idx += Cfg::kThreads) {
    const int row = idx / kGroups, col = (idx % kGroups) * 4;
    const int gr = w.row0 + row;
    if (gr >= w.rows || col_base + col >= p.head_size) continue;
    const int token = w.q_start + gr / a.group;
    const int head = w.kv_head * a.group + gr % a.group;
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < Cfg::kWarpsN; ++s) m = fmaxf(m, m_smem[s * Cfg::kBlockM + row]);
    const float sink2 = apply_sinks ? p.sinks[head] * kLog2e : -INFINITY;
    m = fmaxf(m, sink2);
    const float m_use = m == -INFINITY ? 0.0f : m;
    float l = apply_sinks ? exp2f(sink2 - m_use) : 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < Cfg::kWarpsN; ++s) {
      const float wgt = exp2f(m_smem[s * Cfg::kBlockM + row] - m_use);
      l += wgt * l_smem[s * Cfg::kBlockM + row];
      const float4 part = *reinterpret_cast<const float4*>(
          o_smem + (s * Cfg::kBlockM + row) * Cfg::kORowFloats + col);
      o.x += wgt * part.x;
      o.y += wgt * part.y;
      o.z += wgt * part.z;
      o.w += wgt * part.w;
    }
    const float inv = l > 0.0f ? v_scale / l : 0.0f;
    o.x *= inv;
    o.y *= inv;
    o.z *= inv;
    o.w *= inv;
    const float lse = l > 0.0f ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
    if (a.write_split) {
      const int64_t base =
          ((static_cast<int64_t>(w.split) * p.num_tokens + token) * p.num_heads + head) *
              p.head_size + col_base + col;
      *reinterpret_cast<float4*>(p.split_out + base) = o;
      if (col == 0 && w.dchunk == 0) {
        p.split_lse[(static_cast<int64_t>(w.split) * p.num_heads + head) * p.num_tokens + token] =
            lse;
      }
    } else {
      T* out = static_cast<T*>(p.out) + token * p.out_token_stride + head * p.out_head_stride +
               col_base + col;
      uint2 packed;
      packed.x = device::pack_float2<T>(o.x, o.y);
      packed.y = device::pack_float2<T>(o.z, o.w);
      *reinterpret_cast<uint2*>(out) = packed;
      if (p.lse != nullptr && col == 0 && w.dchunk == 0) {
        p.lse[head * p.lse_head_stride + token] = lse;
      }
    }
  }
}

}  // namespace pagedattn::kernels::attention::v2
