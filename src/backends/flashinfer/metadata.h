// FLASHINFER's per-step metadata: the GPU layer's common parts plus the two parts of the step
// (vLLM's split_decodes_and_prefills, decodes first): the decode part as a plan in the workspace
// that the decode kernel walks, the prefill part as a paged-kernel launch over every request
// (decodes with empty query ranges). Everything forward reads was decided in build().
#pragma once

#include <cstdint>

#include "backends/gpu/dcp_step.h"
#include "backends/gpu/metadata.h"
#include "pagedattn/metadata.h"
#include "plan/decode_plan.h"

namespace pagedattn::flashinfer {

struct FlashInferMetadata final : AttentionMetadata {
  gpu::StepInfo step;
  gpu::SplitWorkspaceView split;
  DecodePrefillSplit parts;  // what the kernels serve (all prefill when decode.kernel is false)
  gpu::DecodePass decode;
  plan::DecodePlanStats decode_stats;
  gpu::PassMetadata prefill;  // the prefill part, or the cascade's suffix pass
  gpu::CascadeMetadata cascade;
  gpu::PassMetadata cascade_prefix;
  gpu::DcpStep dcp;  // a sharded step's passes (when dcp.enabled; then neither part above runs)
  // The first request with context (seq_len > query_len) and its context length; -1 when every
  // request's keys are its new tokens (what a forward without a cache needs).
  int first_request_with_context = -1;
  int first_context_len = 0;
  // vLLM's FlashInfer arrays of this step (host, valid until the next build()): [num_reqs + 1]
  // and [num_reqs].
  const int32_t* paged_kv_indptr = nullptr;
  const int32_t* paged_kv_last_page_len = nullptr;
};

}  // namespace pagedattn::flashinfer
