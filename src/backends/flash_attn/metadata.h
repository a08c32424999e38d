// FLASH_ATTN's per-step metadata (vLLM's FlashAttentionMetadata): the GPU layer's common parts
// (step sizes, split workspace, cascade, decode context parallelism) plus the step's two launches:
// the paged kernels' pass and the decode kernel's plan. Everything forward reads was decided in
// build(); forward only launches.
#pragma once

#include "backends/gpu/dcp_step.h"
#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::flash_attn {

struct FlashAttnMetadata final : AttentionMetadata {
  gpu::StepInfo step;
  gpu::SplitWorkspaceView split;
  // The paged kernels' pass: every request, or the cascade's suffix pass, or with the decode kernel
  // the requests it does not serve (main.pass_requests).
  gpu::PassMetadata main;
  gpu::DecodePass decode;
  int num_decodes = 0;           // requests the decode kernel serves this step
  int decode_max_query_len = 0;  // their longest query
  gpu::CascadeMetadata cascade;
  gpu::PassMetadata prefix;  // the cascade's prefix pass (when cascade.enabled)
  gpu::DcpStep dcp;          // a sharded step's passes (when dcp.enabled; then nothing above runs)
};

}  // namespace pagedattn::flash_attn
