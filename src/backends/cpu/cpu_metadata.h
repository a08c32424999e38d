// CPU_ATTN's per-step metadata: host copies of what forward needs, built once per step.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/layer_spec.h"
#include "pagedattn/backend.h"
#include "pagedattn/dcp_sharding.h"
#include "pagedattn/tensor.h"

namespace pagedattn::cpu {

struct CpuAttentionMetadata final : AttentionMetadata {
  int num_reqs = 0;
  int num_actual_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  backends::LayerSpec layer;             // the builder's; forward checks the layer against it
  int block_size = 0;                    // the builder's; forward checks the cache against it
  std::vector<int32_t> query_start_loc;  // [num_reqs + 1]
  std::vector<int32_t> seq_lens;         // [num_reqs]
  TensorView block_table;                // [num_reqs, max_blocks] int32, host (the caller's buffer)
  bool causal = true;
  // Shared-prefix length run as cascade (prefix pass + suffix pass + merge); 0 = plain attention.
  int common_prefix_len = 0;
  // Decode context parallelism: the step's shard (world size 1 = none) and, per request, how many
  // of its context tokens (seq_len - query_len) this rank stores (vLLM's dcp_context_kv_lens).
  DcpShard dcp;
  std::vector<int32_t> dcp_context_lens;
};

}  // namespace pagedattn::cpu
