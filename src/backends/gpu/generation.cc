// The rule of generation.h (host code, built with or without CUDA).
#include "backends/gpu/generation.h"

#include "backends/gpu/head_sizes.h"

namespace pagedattn::gpu {

int preferred_generation(ComputeCapability cc, int head_size, bool requires_alibi) {
  if (cc < ComputeCapability{8, 0} || !serves_head_size(head_size)) return 0;
  if (cc.major == 9 && !requires_alibi &&
      kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
    return 3;
  }
  return 2;
}

}  // namespace pagedattn::gpu
