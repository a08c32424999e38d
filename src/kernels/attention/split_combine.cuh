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

// The merge rule of both split combines (this one and the decode family's, decode_merge.cuh):
// parts k < n with LSE lse_at(k) and 4 f32 columns part_at(k) each, plus the sink (when not null)
// as one more part with zero output, merged by LSE weight in part order (deterministic). Returns
// the merged columns; `lse` gets the merged LSE (natural log, -inf when every part is empty). An
// empty part's columns are never read (they may hold anything).
template <typename LseAt, typename PartAt>
__device__ __forceinline__ float4 merge_split_parts(int n, const LseAt& lse_at,
                                                    const PartAt& part_at, const float* sink,
                                                    float& lse) {
  device::LseAccumulator acc;
  for (int k = 0; k < n; ++k) acc.add(lse_at(k));
  if (sink != nullptr) acc.add(*sink);
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k = 0; k < n; ++k) {
    const float wgt = acc.weight(lse_at(k));
    if (wgt == 0.0f) continue;
    const float4 v = part_at(k);
    o.x += wgt * v.x;
    o.y += wgt * v.y;
    o.z += wgt * v.z;
    o.w += wgt * v.w;
  }
  lse = acc.lse();
  return o;
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
