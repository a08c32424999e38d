// Warp specialisation on Hopper: per-warpgroup register reallocation (setmaxnreg, sm_90a), one
// elected lane per warp (elect.sync, sm_90) and named barriers among a subset of the block's warps.
#pragma once

#include <cstdint>

namespace pagedattn::device {

// Every warp of the warpgroup executes these, each role in one branch of a single if/else; the
// kernel needs a register cap at entry (__launch_bounds__(threads, 1)) or ptxas ignores them
// (warning C7508). kRegs: a multiple of 8 in [24, 256].
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256, step 8");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256, step 8");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// True in exactly one active lane of the (fully active) warp.
__device__ __forceinline__ bool elect_one() {
  uint32_t elected = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .b32 lane;\n.reg .pred p;\nelect.sync lane|p, 0xffffffff;\nselp.u32 %0, 1, 0, "
      "p;\n}\n"
      : "=r"(elected));
#endif
  return elected != 0;
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace pagedattn::device
