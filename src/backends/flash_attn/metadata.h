// FLASH_ATTN's per-step metadata (vLLM's FlashAttentionMetadata): the GPU layer's common parts
// (step sizes, split workspace, cascade) plus the varlen description of each kernel launch.
// Everything forward reads was decided in build(); forward only launches.
#pragma once

#include <cstdint>

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::flash_attn {

// One attention launch's varlen description: which requests, which keys, how many splits.
struct PassMetadata {
  const int32_t* cu_seqlens_q = nullptr;  // [num_reqs + 1] int32, device
  const int32_t* seqused_k = nullptr;     // [num_reqs] int32, device: keys per request
  const int32_t* block_table = nullptr;   // [num_reqs, block_table_stride] int32, device
  int64_t block_table_stride = 0;
  int num_reqs = 0;
  int max_query_len = 0;  // upper bound
  int max_seq_len = 0;    // upper bound
  bool causal = true;
  // Split-KV: num_splits_per_req [num_reqs] int32 (builder-owned, device). max_num_splits is the
  // graph-safe bound for this token count (what a captured launch uses); max_splits_used is this
  // step's largest count (what an eager launch uses).
  const int32_t* num_splits_per_req = nullptr;
  int max_num_splits = 1;
  int max_splits_used = 1;
};

struct FlashAttnMetadata final : AttentionMetadata {
  gpu::StepInfo step;
  gpu::SplitWorkspaceView split;
  PassMetadata main;  // the whole step (without cascade), or the suffix pass (with cascade)
  gpu::CascadeMetadata cascade;
  PassMetadata prefix;  // the cascade's prefix pass (when cascade.enabled)
};

}  // namespace pagedattn::flash_attn
