// The GPU builders' step workspace: one layout that builder construction sizes (from
// BuilderParams' limits) and every step fills. The int part is plain data written into pinned host memory and
// moved to the device by one asynchronous copy of its used prefix: the prefill arrays first
// (fixed size), then the decode plan (variable size, last). The float part holds the decode
// kernel's split partials. Pure host code.
#pragma once

#include <cstdint>

#include "plan/decode_plan.h"

namespace pagedattn::plan {

struct WorkspaceLimits {
  int max_num_reqs = 256;
  int max_num_tokens = 8192;
  int max_model_len = 32768;
  int head_size = 128;
  DecodePlanConfig decode;  // grid, heads, window, deterministic chunk
};

struct WorkspaceLayout {
  DecodePlanLimits decode;
  // Int part, byte offsets (16-byte aligned).
  int64_t prefill_cu_offset = 0;      // [max_num_reqs + 1] int32: prefill query starts
  int64_t prefill_splits_offset = 0;  // [max_num_reqs] int32: prefill split counts
  int64_t pass_requests_offset = 0;   // [max_num_reqs] int32: the prefill pass's requests
  int64_t kv_indptr_offset = 0;       // [max_num_reqs + 1] int32: vLLM's paged_kv_indptr
  int64_t last_page_len_offset = 0;   // [max_num_reqs] int32: vLLM's paged_kv_last_page_len
  int64_t decode_plan_offset = 0;     // decode.plan_bytes: the decode plan
  int64_t int_bytes = 0;
  // Float part, in floats.
  int64_t partial_out_floats = 0;  // [decode.max_partial_rows, head_size]
  int64_t partial_lse_floats = 0;  // [decode.max_partial_rows]
};

// The most decode requests of a step: a step's decodes (q_len 1 with FLASHINFER's reorder
// threshold; the kernel serves up to kMaxDecodeQueryLen) are at most max_num_reqs requests and
// max_num_tokens tokens.
WorkspaceLayout workspace_layout(const WorkspaceLimits& limits);

}  // namespace pagedattn::plan
