// What a GPU builder plans for a step sharded by decode context parallelism (docs/dcp.md), for
// forward to run as CPU_ATTN's dcp_forward.cc does: (a) the group's N * Hq query heads over this
// rank's context keys, non-causal, no sinks; (b) the combine of (a) over the group, which leaves
// this rank its Hq heads; (c) those heads over the step's new tokens, staged in the cache's format,
// with the step's mask and the sinks; (d) merge_attn_states of (b) and (c). Host-only header:
// plain device pointers, no CUDA types.
#pragma once

#include <cstdint>

#include "backends/gpu/metadata.h"
#include "pagedattn/dcp_heads.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn::gpu {

// Pages of the staged new tokens: the smallest the paged kernels serve. Each request's tokens start
// a page of their own, so the scratch holds at most max_num_tokens + 15 * max_num_reqs tokens.
inline constexpr int kDcpStagePageSize = 16;

struct DcpStep {
  bool enabled = false;
  DcpShard shard;       // this rank's share of every sequence (pagedattn/dcp_sharding.h)
  int num_tokens = 0;   // the step's real tokens (no CUDA-graph padding): what every rank moves
  int group_heads = 0;  // N * Hq: the heads of pass (a)

  // (a): every request's query over its local context keys (dcp_context_kv_lens) through this
  // rank's block table, non-causal, split by plan_split_kv into its own workspace (N * Hq heads).
  PassMetadata context;
  SplitWorkspaceView context_split;
  // Under a window, (a) masks at absolute positions: each request's first new token's
  // ([num_reqs] device, seq_len - query_len), and the rank's keys among them (v2's key shard).
  const int32_t* context_query_pos = nullptr;
  // (c): every request's query over its own new tokens, staged (a page table of the staging
  // scratch), the step's mask, unsplit; the KV heads this rank's query heads read.
  PassMetadata own;
  DcpKvHeads own_kv_heads;
  // The staging scratch: K and V planes [staged_pages, kDcpStagePageSize, Hkv, D] of the cache's
  // storage dtype, NHD, and each new token's slot there, staged_slots [num_tokens] int64.
  void* staged_k = nullptr;
  void* staged_v = nullptr;
  int64_t staged_pages = 0;
  const int64_t* staged_slots = nullptr;

  // Scratch of the passes, the layer's dtype unless f32 is said; rows of num_tokens tokens, LSEs
  // [heads, lse_stride]. Two buffers serve twice, each second life starting after the first ends
  // in stream order: query_packed becomes context_out, query_gathered becomes partial_out.
  void* query_packed = nullptr;    // [T, Hq, D]: this rank's query, the all-gather's send
  void* query_gathered = nullptr;  // [N, T, Hq, D]: every rank's, the all-gather's recv
  void* group_query = nullptr;     // [T, N * Hq, D]: rank s's heads at [s Hq, (s + 1) Hq)
  void* partial_out = nullptr;     // [T, N * Hq, D]: (a)
  float* partial_lse = nullptr;    // [N * Hq, lse_stride] f32
  void* context_out = nullptr;     // [T, Hq, D]: (b)
  float* context_lse = nullptr;    // [Hq, lse_stride] f32
  void* own_out = nullptr;         // [T, Hq, D]: (c)
  float* own_lse = nullptr;        // [Hq, lse_stride] f32
  int64_t lse_stride = 0;
};

}  // namespace pagedattn::gpu
