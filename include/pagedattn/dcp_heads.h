// How decode context parallelism (DCP) splits query heads (docs/dcp.md). Each of the N ranks of a
// group holds num_heads query heads; after the query all-gather every rank has the group's N *
// num_heads heads, rank r's at [r * num_heads, (r + 1) * num_heads), all over the same
// num_kv_heads KV heads (vLLM's DCP reuses tensor-parallel ranks whose KV heads are replicated).
// Group head g reads KV head g / (N * num_heads / num_kv_heads), so N = 1 is plain GQA.
#pragma once

#include "pagedattn/status.h"

namespace pagedattn {

// num_heads a positive multiple of num_kv_heads, and num_kv_heads a multiple or a divisor of
// world_size, so that each rank's head slice reads whole KV-head groups (or part of one).
Status check_dcp_head_split(int num_heads, int num_kv_heads, int world_size);

// The KV heads rank `rank`'s own query heads read: [first, first + count).
struct DcpKvHeads {
  int first = 0;
  int count = 0;
};
DcpKvHeads dcp_kv_heads_of_rank(int num_kv_heads, int world_size, int rank);

}  // namespace pagedattn
