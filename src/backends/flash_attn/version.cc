// The kernel generation FLASH_ATTN runs, like vLLM's get_flash_attn_version
// (research/vllm_backends.md 2.2). Only v2 (mma.sync, sm_80+) is built. When the Hopper v3
// kernel lands it will be chosen for compute capability 9.x, falling back to v2 when ALiBi is
// required (as vLLM does) or the head size has no v3 kernel.
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"

namespace pagedattn::flash_attn {

int flash_attn_version(ComputeCapability cc, int head_size, bool requires_alibi) {
  (void)requires_alibi;  // v2 serves ALiBi; the flag decides only once v3 exists
  if (cc < ComputeCapability{8, 0}) return 0;
  if (!flash_attn_backend().supports_head_size(head_size)) return 0;
  return 2;
}

}  // namespace pagedattn::flash_attn
