// A model's attention layer as an engine knows it. The selector's question, the metadata builder's
// parameters and the impl's parameters all follow from it, here, so that the three never disagree.
#pragma once

#include <optional>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/communicator.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn {

struct AttentionLayer {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 16;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  KVCacheLayout kv_layout = KVCacheLayout::kNHD;
  AttentionType attn_type = AttentionType::kDecoder;
  float scale = 0.0f;  // <= 0 means 1/sqrt(head_size)
  SlidingWindow sliding_window;
  float logits_soft_cap = 0.0f;    // <= 0 = none
  std::vector<float> alibi_slopes;  // [num_heads] or empty
  std::vector<float> sinks;         // [num_heads] or empty
  bool per_head_kv_scales = false;  // FP8 caches: k/v scales per KV head
  Device device = Device::cpu();
  // Decode context parallelism (docs/dcp.md): the group whose ranks shard this layer's KV cache by
  // tokens (not owned; it must outlive what is made from the layer), null = none. Under DCP,
  // num_heads and sinks are this rank's share of the group's query heads (vLLM's contract).
  Communicator* dcp_group = nullptr;
  DcpCommBackend dcp_comm_backend = DcpCommBackend::kAgRs;
  int cp_kv_cache_interleave_size = 1;  // token t on rank (t / I) % world size
};

// `causal`: whether the engine's steps are causal (the layer's own type may override it).
AttentionSelectorConfig selector_config(const AttentionLayer& layer, bool causal = true);
// The builder's limits are left at their defaults: an engine sets them from its scheduler config.
BuilderParams builder_params(const AttentionLayer& layer);
AttentionImplParams impl_params(const AttentionLayer& layer);
// The sharding of the layer's steps: its group's size and rank and its interleave ({1, 0, 1}
// without a group). An engine cuts each rank's block table and slot mapping by it.
DcpShard dcp_shard(const AttentionLayer& layer);
// Writes dcp_shard(layer) into a step's metadata (dcp_world_size, dcp_rank,
// cp_kv_cache_interleave_size), the fields the builders read.
void shard_step(const AttentionLayer& layer, CommonAttentionMetadata& step);

}  // namespace pagedattn
