// FLASH_ATTN's per-step metadata (vLLM's FlashAttentionMetadata): device pointers into the caller's
// CommonAttentionMetadata tensors and into the builder's persistent buffers, plus the host sizes
// forward needs. Everything forward reads was decided in build(); forward only launches.
#pragma once

#include <cstdint>

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
  int device_index = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 0;
  int num_reqs = 0;
  int num_actual_tokens = 0;

  PassMetadata main;  // the whole step (without cascade), or the suffix pass (with cascade)

  // Split partials, shared by the passes (they run one after another on the stream):
  // split_out [splits, tokens, Hq, D] f32 and split_lse [splits, Hq, tokens] f32, splits * tokens
  // <= split_token_capacity.
  float* split_out = nullptr;
  float* split_lse = nullptr;
  int64_t split_token_capacity = 0;

  // Cascade (shared prefix): prefix pass over the first common_prefix_len keys with every query
  // token as one non-causal request, then `main` as the causal suffix pass, merged by LSE.
  bool use_cascade = false;
  int common_prefix_len = 0;
  int cascade_tokens = 0;  // query_start_loc_cpu[num_reqs]: the real tokens, CUDA-graph padding excluded
  PassMetadata prefix;
  // Scratch of the two passes: outputs [max_num_tokens, Hq, D] (query dtype) and LSEs
  // [Hq, scratch_lse_stride] f32.
  void* prefix_out = nullptr;
  void* suffix_out = nullptr;
  float* prefix_lse = nullptr;
  float* suffix_lse = nullptr;
  int64_t scratch_lse_stride = 0;
  DType scratch_dtype = DType::kBF16;
};

}  // namespace pagedattn::flash_attn
