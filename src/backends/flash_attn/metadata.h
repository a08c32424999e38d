// FLASH_ATTN's per-step metadata (vLLM's FlashAttentionMetadata): the GPU layer's common parts
// (step sizes, split workspace, cascade) plus the varlen description of each kernel launch.
// Everything forward reads was decided in build(); forward only launches.
#pragma once

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::flash_attn {

struct FlashAttnMetadata final : AttentionMetadata {
  gpu::StepInfo step;
  gpu::SplitWorkspaceView split;
  gpu::PassMetadata main;  // the whole step (without cascade), or the suffix pass (with cascade)
  gpu::CascadeMetadata cascade;
  gpu::PassMetadata prefix;  // the cascade's prefix pass (when cascade.enabled)
};

}  // namespace pagedattn::flash_attn
