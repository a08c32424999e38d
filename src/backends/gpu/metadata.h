// What every GPU backend's per-step metadata holds, whatever its kernels: the layer shape, device
// and sizes the step was built for (forward checks them against the layer), the split workspace and
// the cascade passes. Host-only header: plain device pointers, no CUDA types.
#pragma once

#include <cstdint>

#include "backends/gpu/generation.h"
#include "backends/layer_spec.h"
#include "pagedattn/backend.h"
#include "pagedattn/metadata.h"

namespace pagedattn::gpu {

struct StepInfo {
  int device_index = 0;
  backends::LayerSpec layer;  // what the builder was made for; forward checks the layer against it
  int block_size = 0;
  int num_reqs = 0;
  int num_actual_tokens = 0;  // may include CUDA-graph padding
  const int32_t* query_start_loc = nullptr;  // [num_reqs + 1] device: the step's own query starts
};
StepInfo step_info(const BuilderParams& params, const CommonAttentionMetadata& meta);

// One launch of the paged attention kernels: which requests, which keys, how many splits.
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
  PassKernel kernel = PassKernel::kV3;  // gpu::pass_kernel (generation.h)
  // The requests this pass serves when not all (kernels::PagedAttentionParams::pass_requests):
  // [num_reqs] int32, device, the num_pass_reqs served first, then -1, so that a captured launch
  // over all num_reqs slots replays any mix.
  const int32_t* pass_requests = nullptr;
  int num_pass_reqs = 0;
};

// The decode kernel's part of a step (kernels/decode/): its plan in the step workspace.
struct DecodePass {
  bool kernel = false;  // the decode kernel serves this step's decode rows (else the paged kernels)
  const void* plan = nullptr;  // device, kernels/decode/work.h layout
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
  int num_ctas = 0;
  const int32_t* block_table = nullptr;  // [num_reqs, block_table_stride] int32, device
  int64_t block_table_stride = 0;
};

// The pass over its requests from `first` on: the leading ones have empty query ranges (FLASHINFER's
// decodes, which the decode kernel serves), and an eager launch need not start CTAs for them. The
// query starts keep their values, so the launch writes the same output rows.
inline PassMetadata pass_from_request(const PassMetadata& pass, int first) {
  PassMetadata p = pass;
  p.cu_seqlens_q += first;
  p.seqused_k += first;
  p.block_table += first * pass.block_table_stride;
  if (p.num_splits_per_req != nullptr) p.num_splits_per_req += first;
  p.num_reqs -= first;
  return p;
}

// Split-KV partials, shared by every pass of a step (they run one after another on the stream):
// out [splits, tokens, Hq, D] f32 and lse [splits, Hq, tokens] f32, splits * tokens <=
// token_capacity.
struct SplitWorkspaceView {
  float* out = nullptr;
  float* lse = nullptr;
  int64_t token_capacity = 0;
  size_t out_bytes = 0;  // out's allocation (an unsplit launch may use it: GpuImpl::offer_fp8_tensor_cores)
};

// Cascade (a shared prefix): the prefix pass runs every real query token as one non-causal request
// over the first common_prefix_len keys (block-table row 0: every request shares those blocks), the
// suffix pass runs each request over its own keys after them (block table offset by prefix_blocks),
// and the two are merged by LSE. Sinks count once, in the prefix pass.
struct CascadeMetadata {
  bool enabled = false;
  int common_prefix_len = 0;
  int num_tokens = 0;     // query_start_loc_cpu[num_reqs]: real tokens, CUDA-graph padding excluded
  int prefix_blocks = 0;  // common_prefix_len / block_size
  int suffix_max_seq_len = 0;                    // upper bound of the suffix lengths
  const int32_t* prefix_cu_seqlens_q = nullptr;  // [2] int32, device: {0, num_tokens}
  const int32_t* prefix_seqused_k = nullptr;     // [1] int32, device: {common_prefix_len}
  const int32_t* prefix_extra = nullptr;         // [n] int32, device: the backend's own ints
  const int32_t* suffix_seqused_k = nullptr;     // [num_reqs] int32, device: seq_lens - prefix
  // Scratch of the two passes: outputs [max_num_tokens, Hq, D] (dtype), LSEs [Hq, lse_stride] f32.
  void* prefix_out = nullptr;
  void* suffix_out = nullptr;
  float* prefix_lse = nullptr;
  float* suffix_lse = nullptr;
  int64_t lse_stride = 0;
  DType dtype = DType::kBF16;
};

}  // namespace pagedattn::gpu
