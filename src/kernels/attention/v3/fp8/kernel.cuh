// The v3 FP8 prefill kernel for head size kD and KV tiles kTiles (v3/fp8/tile_configs.cuh):
// warpgroup 0 produces (Q converted to e4m3; K by TMA and Vᵀ, transposed by the launch's pre-pass,
// by bulk copies), the others consume (both products on the FP8 tensor cores). Persistent like the
// bf16 kernel: the CTAs walk the same work tiles. Compiled for sm_90a alone
// (prefill_fp8_d<D>_sm90.cu).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "kernels/attention/v3/fp8/mainloop_load.cuh"
#include "kernels/attention/v3/fp8/mainloop_mma.cuh"
#include "kernels/attention/v3/fp8/traits.cuh"

namespace pagedattn::kernels::attention::v3 {

// kE4m3Q: Q comes in e4m3 (PrefillFp8Args::q_e4m3), copied rather than converted: a kernel of its
// own, so that each kernel's producer holds one loop (with both, the bf16 query's D 256 kernel ran
// 1.5-1.9 % slower).
template <int kD, Fp8Tiles kTiles, bool kE4m3Q>
__global__ void __launch_bounds__(PrefillFp8Traits<kD>::kThreads, 1)
    paged_prefill_v3_fp8_kernel(const __grid_constant__ CUtensorMap q_map,
                                const __grid_constant__ CUtensorMap k_map, const PrefillFp8Args a) {
  constexpr int kN = fp8_kv_tile_keys(kD, kTiles);
  using S = PrefillFp8Traits<kD, kN>;
  const int total_tiles = a.base.num_heads * a.base.num_reqs * a.base.num_q_tiles;
  extern __shared__ uint8_t smem_raw[];
  PrefillFp8Smem<kD, kN>& s = *reinterpret_cast<PrefillFp8Smem<kD, kN>*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  if (threadIdx.x == 0) {
    constexpr uint32_t kConsumerThreads = S::kConsumers * 128;
    constexpr uint32_t kConverters = 96;  // producer warps 1-3 convert Q
    device::mbarrier_init(&s.q_full, kConverters);
    device::mbarrier_init(&s.q_empty, kConsumerThreads);
    device::mbarrier_init(&s.q_stage_full, 1);
    device::mbarrier_init(&s.q_stage_empty, kConverters);
    for (int i = 0; i < S::kStages; ++i) {
      device::mbarrier_init(&s.k_full[i], 1);
      device::mbarrier_init(&s.vt_full[i], 1);
      device::mbarrier_init(&s.k_empty[i], kConsumerThreads);
      device::mbarrier_init(&s.vt_empty[i], kConsumerThreads);
    }
    device::mbarrier_init_fence();
  }
  if (threadIdx.x < 256) reinterpret_cast<uint32_t*>(s.ones)[threadIdx.x] = 0x38383838u;  // 1.0
  device::fence_proxy_async_shared();  // wgmma reads the ones
  __syncthreads();
  // Broadcast from lane 0, so the compiler knows it is warp-uniform: the consumers' Q addresses and
  // wgmma descriptors then live in uniform registers, not copied into them before each product.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == 0) {
    device::setmaxnreg_dec<S::kProducerRegisters>();
    produce_fp8<kD, kE4m3Q>(&q_map, &k_map, a, total_tiles, s);
  } else {
    device::setmaxnreg_inc<S::kConsumerRegisters>();
    consume_fp8<kD>(a, total_tiles, s, warpgroup - 1);
  }
}

}  // namespace pagedattn::kernels::attention::v3
