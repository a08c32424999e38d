// Epilogue of a decode work unit: each warp parks its unnormalized O rows (at `smem`) and its row
// maxima and sums (at `ml`) in shared memory; the CTA merges the warps' key slices of each row and
// writes either the final output and LSE (with the sink, added once) or the unit's f32 partial
// for the merge (decode/split_merge.cuh).
#pragma once

#include <cmath>

#include "device/tma.cuh"
#include "kernels/attention/split_combine.cuh"
#include "kernels/decode/mainloop_mma.cuh"

namespace pagedattn::kernels::decode {

// Float `col` of row `row` of the warps' O rows. Swizzled, row r's float4 groups are permuted
// within each block of 8 by r % 8, so the 8 rows of a fragment store (lanes g = 0..7) land in
// different banks (rows of 128 floats would put them all in one).
template <typename Cfg>
__device__ __forceinline__ int o_slot(int row, int col) {
  if constexpr (Cfg::kSwizzleO) return row * Cfg::kORowFloats + (col ^ ((row & 7) << 2));
  return row * Cfg::kORowFloats + col;
}

// This lane's fragment of the warp's O (rows g and g + 8) into its rows, two adjacent columns per
// 8-byte store: a thread's pairs (2t, 2t + 1) of each n8 tile, or with FP8 caches (whose n8 tiles
// interleave in pairs, out_column) the same element of tiles 2k and 2k + 1.
template <typename Cfg>
__device__ __forceinline__ void park_o_rows(const WarpState<Cfg>& st, float* o_smem, int warp,
                                            int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp * kDecodeRowsPerTile + lane / 4 + 8 * h;
    if constexpr (Cfg::kFp8) {
#pragma unroll
      for (int dt = 0; dt < 2 * Cfg::kKSteps; dt += 2)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          *reinterpret_cast<float2*>(o_smem +
                                     o_slot<Cfg>(row, out_column<Cfg>(dt, 2 * h + j, lane))) =
              make_float2(st.o[dt][2 * h + j], st.o[dt + 1][2 * h + j]);
        }
    } else {
#pragma unroll
      for (int dt = 0; dt < 2 * Cfg::kKSteps; ++dt) {
        *reinterpret_cast<float2*>(o_smem + o_slot<Cfg>(row, out_column<Cfg>(dt, 2 * h, lane))) =
            make_float2(st.o[dt][2 * h], st.o[dt][2 * h + 1]);
      }
    }
  }
}

template <typename Cfg, typename T>
__device__ __forceinline__ void store_unit(const DecodeArgs& a, const UnitWork& w,
                                           const WarpState<Cfg>& st, float v_scale, char* smem,
                                           char* ml) {
  const DecodeAttentionParams& p = a.p;
  constexpr int kRows = kDecodeRowsPerTile;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* o_smem = reinterpret_cast<float*>(smem);  // [warps][16][kORowFloats], o_slot
  float* m_smem = reinterpret_cast<float*>(ml);    // [warps][16]
  float* l_smem = m_smem + Cfg::kWarps * kRows;
  park_o_rows<Cfg>(st, o_smem, warp, lane);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (lane % 4 == 0) {
      m_smem[warp * kRows + row] = st.m[h];
      l_smem[warp * kRows + row] = l;
    }
  }
  __syncthreads();

  const bool final_out = w.partial < 0;
  const bool apply_sink = final_out && p.sinks != nullptr;
  constexpr int kGroups = Cfg::kHeadDim / 4;  // 4 columns per item
  for (int idx = threadIdx.x; idx < w.rows * kGroups; idx += Cfg::kThreads) {
    const int row = idx / kGroups, col = (idx % kGroups) * 4;
    if (col >= p.head_size) continue;
    const int gr = w.row0 + row;
    const int token = w.q_start + gr / a.group;
    const int head = w.kv_head * a.group + gr % a.group;
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < Cfg::kWarps; ++s) m = fmaxf(m, m_smem[s * kRows + row]);
    const float sink2 = apply_sink ? p.sinks[head] * kLog2e : -INFINITY;
    m = fmaxf(m, sink2);
    const float m_use = m == -INFINITY ? 0.0f : m;
    float l = apply_sink ? exp2f(sink2 - m_use) : 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < Cfg::kWarps; ++s) {
      const float wgt = exp2f(m_smem[s * kRows + row] - m_use);
      l += wgt * l_smem[s * kRows + row];
      const float4 part =
          *reinterpret_cast<const float4*>(o_smem + o_slot<Cfg>(s * kRows + row, col));
      o.x += wgt * part.x;
      o.y += wgt * part.y;
      o.z += wgt * part.z;
      o.w += wgt * part.w;
    }
    const float inv = l > 0.0f ? v_scale / l : 0.0f;
    o = make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
    const float lse = l > 0.0f ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
    if (final_out) {
      attention::store_columns4(
          static_cast<T*>(p.out) + token * p.out_token_stride + head * p.out_head_stride + col, o);
      if (p.lse != nullptr && col == 0) p.lse[head * p.lse_head_stride + token] = lse;
    } else {
      const int64_t prow = w.partial + row;
      *reinterpret_cast<float4*>(p.partial_out + prow * p.head_size + col) = o;
      if (col == 0) p.partial_lse[prow] = lse;
    }
  }
  // The next unit reuses the shared memory (TMA: the async proxy overwrites these rows).
  if constexpr (Cfg::kTma) device::fence_proxy_async_shared();
  __syncthreads();
}

}  // namespace pagedattn::kernels::decode
