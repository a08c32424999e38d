// Split-KV combine, for any kernel generation that writes split partials: merges the
// max_num_splits partials of every (token, head) into out/lse with merge_attn_states' math
// (natural-log LSE weights; empty splits have LSE -inf), adding the sink as one more part with
// zero output. Tokens past the last request (graph padding) are skipped.
#pragma once

#include <cuda_runtime.h>

#include "device/convert.cuh"
#include "device/softmax_state.cuh"
#include "kernels/attention/paged_attention.h"

namespace pagedattn::kernels::attention {

// The merge rule of both split combines (this one and the decode family's, decode/split_merge.cuh):
// parts k < n with LSE lse_at(k) and 4 f32 columns part_at(k) each, plus the sink (when not null)
// as one more part with zero output, merged by LSE weight in part order (deterministic). Returns
// the merged columns; `lse` gets the merged LSE (natural log, -inf when every part is empty). An
// empty part's columns are read but never used (they may hold anything). One pass with a running
// maximum, kBatch parts' loads issued together: the merge runs at the end of the decode kernel's
// critical path, where a load round trip per part (two passes, a branch on each weight) would add
// to every launch.
template <typename LseAt, typename PartAt>
__device__ __forceinline__ float4 merge_split_parts(int n, const LseAt& lse_at,
                                                    const PartAt& part_at, const float* sink,
                                                    float& lse) {
  constexpr int kBatch = 4;
  float m = -INFINITY, sum = 0.0f;  // running max and sum of exp(lse_k - m) over non-empty parts
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k0 = 0; k0 < n; k0 += kBatch) {
    float l[kBatch];
    float4 v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const bool in = k0 + i < n;
      l[i] = in ? lse_at(k0 + i) : -INFINITY;
      v[i] = in ? part_at(k0 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (device::lse_is_empty(l[i])) continue;
      const float m_new = fmaxf(m, l[i]);
      const float keep = expf(m - m_new), w = expf(l[i] - m_new);  // expf(-inf) = 0
      sum = sum * keep + w;
      o = make_float4(o.x * keep + w * v[i].x, o.y * keep + w * v[i].y, o.z * keep + w * v[i].z,
                      o.w * keep + w * v[i].w);
      m = m_new;
    }
  }
  if (sink != nullptr && !device::lse_is_empty(*sink)) {
    const float m_new = fmaxf(m, *sink);
    const float keep = expf(m - m_new);
    sum = sum * keep + expf(*sink - m_new);
    o = make_float4(o.x * keep, o.y * keep, o.z * keep, o.w * keep);
    m = m_new;
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  lse = sum > 0.0f ? m + logf(sum) : -INFINITY;
  return make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
}

// Four output columns, packed to T.
template <typename T>
__device__ __forceinline__ void store_columns4(T* out, float4 o) {
  uint2 packed;
  packed.x = device::pack_float2<T>(o.x, o.y);
  packed.y = device::pack_float2<T>(o.z, o.w);
  *reinterpret_cast<uint2*>(out) = packed;
}

template <typename T>
cudaError_t launch_split_combine(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace pagedattn::kernels::attention
