// The v3 prefill kernel for head size kD: warp-specialised CTAs (v3/traits.cuh) that walk work
// tiles (v3/tile_scheduler.cuh), many per CTA on a grid of one CTA per SM (persistent: the next
// tile's loads overlap the previous tile's last product and stores). Compiled for sm_90a alone
// (v3/launch_sm90.cu, in the pagedattn_sm90 object library).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/warp_specialize.cuh"
#include "kernels/attention/v3/mainloop_load.cuh"
#include "kernels/attention/v3/mainloop_mma.cuh"
#include "kernels/attention/v3/traits.cuh"

namespace pagedattn::kernels::attention::v3 {

// kTransform: the scores pass through the soft cap and ALiBi (PrefillArgs::score), a kernel of
// its own so that the plain one keeps its registers and instructions. kPacked: GQA-packed work
// tiles (PrefillArgs::packed_positions, v3/rows.cuh), a kernel of its own for the same reason.
template <int kD, bool kTransform, bool kPacked = false>
__global__ void __launch_bounds__(PrefillTraits<kD>::kThreads, 1)
    paged_prefill_v3_kernel(const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ KvMaps kv_maps, const PrefillArgs a) {
  using S = PrefillTraits<kD>;
  const int tile_heads = kPacked ? a.num_kv_heads : a.num_heads;
  const int total_tiles = tile_heads * a.num_reqs * a.num_q_tiles * a.max_splits;
  extern __shared__ uint8_t smem_raw[];
  PrefillSmem<kD>& s = *reinterpret_cast<PrefillSmem<kD>*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  if (threadIdx.x == 0) {
    for (int i = 0; i < S::kQStages; ++i) {
      device::mbarrier_init(&s.q_full[i], 1);
      device::mbarrier_init(&s.q_empty[i], S::kConsumers * 128);  // every consumer thread releases
    }
    for (int i = 0; i < S::kStages; ++i) {
      device::mbarrier_init(&s.k_full[i], 1);
      device::mbarrier_init(&s.v_full[i], 1);
      device::mbarrier_init(&s.k_empty[i], S::kConsumers * 128);
      device::mbarrier_init(&s.v_empty[i], S::kConsumers * 128);
    }
    device::mbarrier_init_fence();
  }
  __syncthreads();
  // Broadcast from lane 0, so the compiler knows it is warp-uniform: the consumers' Q addresses and
  // wgmma descriptors then live in uniform registers, not copied into them before each product.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == 0) {
    device::setmaxnreg_dec<S::kProducerRegisters>();
    if (threadIdx.x / 32 < a.box_warps) {
      produce<kD, kPacked>(&q_map, &kv_maps, a, total_tiles, s);
    }
  } else {
    device::setmaxnreg_inc<S::kConsumerRegisters>();
    consume<kD, kTransform, kPacked>(a, total_tiles, s, warpgroup - 1);
  }
}

}  // namespace pagedattn::kernels::attention::v3
