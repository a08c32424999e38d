// The v3 prefill kernel: one CTA per (query head, 128-row query tile, request), warp-specialised
// (prefill_shape.cuh). Query tiles run longest first under a causal mask (blockIdx.y counts down).
// Compiled for sm_90a alone (v3/launch_sm90.cu, in the pagedattn_sm90 object library).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/warp_specialize.cuh"
#include "kernels/attention/mask.h"
#include "kernels/attention/v3/prefill_consumer.cuh"
#include "kernels/attention/v3/prefill_producer.cuh"
#include "kernels/attention/v3/prefill_shape.cuh"

namespace pagedattn::kernels::attention::v3 {

__device__ __forceinline__ bool find_tile(const PrefillArgs& a, PrefillTile& w) {
  using S = PrefillShape;
  w.req = blockIdx.z;
  w.head = blockIdx.x;
  w.kv_head = w.head / a.group;
  w.q_start = a.cu_seqlens_q[w.req];
  w.q_len = a.cu_seqlens_q[w.req + 1] - w.q_start;
  w.q0 = (gridDim.y - 1 - blockIdx.y) * S::kBlockM;
  if (w.q0 >= w.q_len) return false;
  w.k_len = a.seqused_k[w.req];
  // The tile's last row sees the most keys (the queries are the last q_len positions).
  const int last_row = min(w.q0 + S::kBlockM, w.q_len) - 1;
  const KeyRange<int> seen = visible_keys(a.mask, w.k_len, last_row + w.k_len - w.q_len);
  w.num_kv_tiles = (seen.hi + 1 + S::kBlockN - 1) / S::kBlockN;
  return w.num_kv_tiles > 0;
}

__global__ void __launch_bounds__(PrefillShape::kThreads, 1)
    paged_prefill_v3_kernel(const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ CUtensorMap kv_map, const PrefillArgs a) {
  using S = PrefillShape;
  PrefillTile w;
  if (!find_tile(a, w)) return;  // the same answer in every thread, before any barrier
  extern __shared__ uint8_t smem_raw[];
  PrefillSmem& s = *reinterpret_cast<PrefillSmem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                                   ~uintptr_t{1023});
  if (threadIdx.x == 0) {
    device::mbarrier_init(&s.q_full, 1);
    for (int i = 0; i < S::kStages; ++i) {
      device::mbarrier_init(&s.k_full[i], 1);
      device::mbarrier_init(&s.v_full[i], 1);
      device::mbarrier_init(&s.k_empty[i], 2 * 128);  // every consumer thread releases
      device::mbarrier_init(&s.v_empty[i], 2 * 128);
    }
    device::mbarrier_init_fence();
  }
  __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    device::setmaxnreg_dec<S::kProducerRegisters>();
    if (threadIdx.x / 32 == 0) produce(&q_map, &kv_map, a, w, s);
  } else {
    device::setmaxnreg_inc<S::kConsumerRegisters>();
    consume(a, w, s, warpgroup - 1);
  }
}

}  // namespace pagedattn::kernels::attention::v3
