// What a metadata builder was made for that every layer run with its metadata must share (vLLM
// gives layers that differ in any of it builders of their own): the KV-cache spec's heads, head
// size and dtypes, and whether the layer uses ALiBi and which window, all given to both
// BuilderParams and AttentionImplParams. Each backend's forward checks the layer against the
// builder's, so a field given to both is never silently taken from one of them.
#pragma once

#include "pagedattn/backend.h"

namespace pagedattn::backends {

struct LayerSpec {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  bool use_alibi = false;  // the layer's alibi_slopes are given
  SlidingWindow sliding_window;
};

LayerSpec layer_spec(const BuilderParams& params);

// An InvalidArgument naming the first field where the layer differs from the builder's spec, with
// both values. kv_cache_dtype compares what the cache stores (auto under a bf16 model is bfloat16).
Status check_layer_spec(const LayerSpec& builder, const AttentionImplParams& layer);

}  // namespace pagedattn::backends
