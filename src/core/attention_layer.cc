#include "pagedattn/attention_layer.h"

namespace pagedattn {

AttentionSelectorConfig selector_config(const AttentionLayer& layer, bool causal) {
  AttentionSelectorConfig c;
  c.head_size = layer.head_size;
  c.num_heads = layer.num_heads;
  c.num_kv_heads = layer.num_kv_heads;
  c.dtype = layer.dtype;
  c.kv_cache_dtype = layer.kv_cache_dtype;
  c.block_size = layer.block_size;
  c.has_sinks = !layer.sinks.empty();
  c.use_alibi = !layer.alibi_slopes.empty();
  c.use_sliding_window = layer.sliding_window.enabled();
  c.use_soft_cap = layer.logits_soft_cap > 0.0f;
  c.causal = causal;
  c.attn_type = layer.attn_type;
  c.use_per_head_quant_scales = layer.per_head_kv_scales;
  c.device = layer.device;
  c.dcp_world_size = dcp_shard(layer).world_size;
  return c;
}

BuilderParams builder_params(const AttentionLayer& layer) {
  BuilderParams p;
  p.num_heads = layer.num_heads;
  p.num_kv_heads = layer.num_kv_heads;
  p.head_size = layer.head_size;
  p.block_size = layer.block_size;
  p.dtype = layer.dtype;
  p.kv_cache_dtype = layer.kv_cache_dtype;
  p.device = layer.device;
  p.use_alibi = !layer.alibi_slopes.empty();
  p.sliding_window = layer.sliding_window;
  return p;
}

AttentionImplParams impl_params(const AttentionLayer& layer) {
  AttentionImplParams p;
  p.num_heads = layer.num_heads;
  p.head_size = layer.head_size;
  p.scale = layer.scale;
  p.num_kv_heads = layer.num_kv_heads;
  p.dtype = layer.dtype;
  p.alibi_slopes = layer.alibi_slopes;
  p.sliding_window = layer.sliding_window;
  p.kv_cache_dtype = layer.kv_cache_dtype;
  p.logits_soft_cap = layer.logits_soft_cap;
  p.attn_type = layer.attn_type;
  p.sinks = layer.sinks;
  p.kv_layout = layer.kv_layout;
  p.device = layer.device;
  p.dcp_group = layer.dcp_group;
  p.dcp_comm_backend = layer.dcp_comm_backend;
  return p;
}

DcpShard dcp_shard(const AttentionLayer& layer) {
  if (layer.dcp_group == nullptr) return DcpShard{1, 0, layer.cp_kv_cache_interleave_size};
  return DcpShard{layer.dcp_group->world_size(), layer.dcp_group->rank(),
                  layer.cp_kv_cache_interleave_size};
}

void shard_step(const AttentionLayer& layer, CommonAttentionMetadata& step) {
  const DcpShard shard = dcp_shard(layer);
  step.dcp_world_size = shard.world_size;
  step.dcp_rank = shard.rank;
  step.cp_kv_cache_interleave_size = shard.interleave;
}

}  // namespace pagedattn
