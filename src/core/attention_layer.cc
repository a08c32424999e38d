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
  return p;
}

}  // namespace pagedattn
