// CommonAttentionMetadata (vLLM v1): one per scheduling step, shared by every layer and backend,
// plus the batch split/reorder helpers that order a batch decode-first.
#pragma once

#include <cstdint>
#include <vector>

#include "pagedattn/dcp_sharding.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"

namespace pagedattn {

struct CommonAttentionMetadata {
  TensorView query_start_loc;      // [num_reqs + 1] int32, device (cu_seqlens_q)
  TensorView query_start_loc_cpu;  // [num_reqs + 1] int32, host
  TensorView seq_lens;             // [num_reqs] int32, device: context + new tokens
  TensorView seq_lens_cpu;         // [num_reqs] int32, host
  int num_reqs = 0;
  int num_actual_tokens = 0;  // may include CUDA-graph padding tokens (slot -1)
  int max_query_len = 0;
  int max_seq_len = 0;            // may be an upper bound
  TensorView block_table_tensor;  // [num_reqs, max_blocks] int32, device
  TensorView slot_mapping;        // [num_tokens] int64, device; -1 = padding, do not write
  bool causal = true;  // decoder layers' mask; encoder layers are bidirectional whatever it says
  // Optional [num_reqs] u8, host: num_computed < num_prompt. As in vLLM, where its Mamba backends
  // use it to tell a short extend still in its prompt from a decode: read by
  // split_decodes_and_prefills(treat_short_extends_as_decodes = false). No attention backend has a
  // use for it (a short extend's attention is a decode's); validate() checks it.
  TensorView is_prefilling;
  // Decode context parallelism (docs/dcp.md; vLLM's names): this step's KV tokens are sharded over
  // dcp_world_size ranks, token t on rank (t / cp_kv_cache_interleave_size) % dcp_world_size, and
  // this metadata is rank dcp_rank's: block_table_tensor holds its own blocks (its local positions)
  // and slot_mapping is -1 for the new tokens other ranks store (dcp_slot_mapping). seq_lens and
  // query_start_loc stay the whole step's, the same on every rank. 1 / 0 / 1: no DCP.
  int dcp_world_size = 1;
  int dcp_rank = 0;
  int cp_kv_cache_interleave_size = 1;

  DcpShard dcp_shard() const { return {dcp_world_size, dcp_rank, cp_kv_cache_interleave_size}; }
  int batch_size() const { return num_reqs; }
  // query_start_loc_cpu[r + 1] - query_start_loc_cpu[r] for every request (host data).
  std::vector<int32_t> naive_query_lens() const;

  // Checks every field against the others and against the cache geometry. Each error names the
  // field, the value and what is allowed.
  //  - Every view with elements has a non-null pointer; shapes, ranks and dtypes are checked.
  //  - Host copies (query_start_loc_cpu, seq_lens_cpu) are always read and checked.
  //  - The DCP fields (DcpShard::validate: dcp_world_size in [1, 1024], dcp_rank in
  //    [0, dcp_world_size), cp_kv_cache_interleave_size >= 1 dividing block_size); under DCP the
  //    block table and slots are checked against the rank's local lengths and positions.
  //  - block_table_tensor and slot_mapping contents are checked when they live on the host: block
  //    ids in [0, num_blocks) (an id may stand twice in a request, read at each position, but not
  //    at two columns the step writes into), each real token's slot >= 0 and where
  //    the table puts its position, CUDA-graph padding tokens (between query_start_loc_cpu's last
  //    entry and num_actual_tokens) at -1.
  // Not checked (the caller's promise): the contents of device-resident views, that a view's
  // memory really spans its shape and strides, and the host/device copies' agreement when the
  // device copy is on a device.
  Status validate(int block_size, int64_t num_blocks) const;

  // A cascade's shared prefix: common_prefix_len is a non-negative multiple of block_size, at most
  // every request's context length (seq_len - query_len), and - when block_table_tensor is on the
  // host - its first common_prefix_len / block_size blocks are the same ids in every request (the
  // prefix pass reads them once for all). 0 always passes. Builders call this before using a
  // prefix; with a device-resident block table the shared-blocks part is the caller's promise.
  Status validate_common_prefix(int common_prefix_len, int block_size) const;
};

// vLLM's split_decodes_and_prefills: the batch is assumed reordered decode-first.
struct DecodePrefillSplit {
  int num_decodes = 0;
  int num_prefills = 0;
  int num_decode_tokens = 0;
  int num_prefill_tokens = 0;
  friend bool operator==(const DecodePrefillSplit&, const DecodePrefillSplit&) = default;
};
DecodePrefillSplit split_decodes_and_prefills(const CommonAttentionMetadata& meta,
                                              int decode_threshold = 1,
                                              bool require_uniform = false,
                                              bool treat_short_extends_as_decodes = true);

// One request as the scheduler sees it when reordering the persistent batch.
struct ScheduledRequest {
  int num_scheduled_tokens = 0;
  int num_computed_tokens = 0;
  int num_prompt_tokens = 0;
};
struct BatchReorder {
  std::vector<int> order;  // order[i] = original index of the request now at position i
  bool modified = false;
};
// vLLM's reorder_batch_to_split_decodes_and_prefills, including its swap-cycle order inside
// regions: decodes, short extends, long extends, then new prefills.
BatchReorder reorder_batch_to_split_decodes_and_prefills(
    const std::vector<ScheduledRequest>& requests, int decode_threshold = 1);

}  // namespace pagedattn
