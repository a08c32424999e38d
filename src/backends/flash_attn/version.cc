// The kernel generation FLASH_ATTN prefers, like vLLM's get_flash_attn_version
// (docs/architecture.md, "Choosing a backend"): v3 (Hopper wgmma + TMA) on compute capability 9.x
// when this build has it and no ALiBi is required (as vLLM does for FA3), else v2 (mma.sync, sm_80+).
// v3 serves a subset of launches (kernels/attention/v3/launch.h); the impl runs v2 for the rest.
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "kernels/attention/paged_attention.h"

namespace pagedattn::flash_attn {

int flash_attn_version(ComputeCapability cc, int head_size, bool requires_alibi) {
  if (cc < ComputeCapability{8, 0}) return 0;
  if (!flash_attn_backend().supports_head_size(head_size)) return 0;
  const bool hopper = cc.major == 9;
  if (hopper && !requires_alibi &&
      kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
    return 3;
  }
  return 2;
}

}  // namespace pagedattn::flash_attn
