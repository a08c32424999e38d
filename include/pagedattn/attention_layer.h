// A model's attention layer as an engine knows it. The selector's question, the metadata builder's
// parameters and the impl's parameters all follow from it, here, so that the three never disagree.
#pragma once

#include <optional>
#include <vector>

#include "pagedattn/backend.h"

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
};

// `causal`: whether the engine's steps are causal (the layer's own type may override it).
AttentionSelectorConfig selector_config(const AttentionLayer& layer, bool causal = true);
// The builder's limits are left at their defaults: an engine sets them from its scheduler config.
BuilderParams builder_params(const AttentionLayer& layer);
AttentionImplParams impl_params(const AttentionLayer& layer);

}  // namespace pagedattn
