// The KV-cache layout an impl was made for (AttentionImplParams::kv_layout) against the layout
// the cache's strides show, checked by every backend wherever it reads or writes the cache.
#pragma once

#include <optional>

#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn::backends {

// The layout of a logical [num_blocks, 2, block_size, Hkv, D] cache view: NHD when a block's
// tokens lie further apart than its heads, HND when its heads do; unset when a block holds one
// token or one KV head (both layouts then address the same bytes).
std::optional<KVCacheLayout> strided_layout(const TensorView& kv_cache);

// An InvalidArgument naming kv_layout, the layout the impl was made for and the one the cache's
// strides show, when they differ.
Status check_cache_layout(const TensorView& kv_cache, KVCacheLayout kv_layout);

}  // namespace pagedattn::backends
