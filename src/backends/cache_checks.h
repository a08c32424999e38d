// A layer's paged KV cache as every backend checks it wherever it reads or writes the cache: the
// two planes (KVCacheView), their dtype, device and shape against the impl, and the layout the
// impl was made for (AttentionImplParams::kv_layout) against the one the strides show.
#pragma once

#include <initializer_list>
#include <optional>

#include "pagedattn/kv_cache.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn::backends {

// The layout of a plane [num_blocks, block_size, Hkv, D]: NHD when a block's tokens lie further
// apart than its heads, HND when its heads do; unset when a block holds one token or one KV head
// (both layouts then address the same bytes).
std::optional<KVCacheLayout> strided_layout(const TensorView& plane);

// What every backend needs of a cache: defined and well formed (KVCacheView::check), one of
// `dtypes`, on `device`, num_kv_heads x head_size rows, strided as kv_layout. The first problem as
// an InvalidArgument naming the tensor(s) given.
Status check_kv_cache(const KVCacheView& kv_cache, std::initializer_list<DType> dtypes,
                      const Device& device, int num_kv_heads, int head_size,
                      KVCacheLayout kv_layout);

}  // namespace pagedattn::backends
