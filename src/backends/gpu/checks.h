// The parameter and call checks every GPU backend makes, written once over the backend's own
// description (name, dtypes, block sizes, head sizes) and the common StepInfo. Host code: the
// checks read shapes, strides and devices only, never device memory.
#pragma once

#include <string_view>

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

// make_builder: a CUDA device, positive head counts with whole GQA groups, a head size, block size
// and dtype the backend serves, positive persistent-buffer limits and a non-negative num_sms.
Status check_builder_params(const AttentionBackend& backend, const BuilderParams& params);

// build(): the step fits the builder's limits, meta.validate passes (a step sharded by decode
// context parallelism included: both GPU backends serve it), and the device vectors the kernels
// read are on the builder's device with contiguous rows.
Status check_step(const BuilderParams& params, const CommonAttentionMetadata& meta);

// make_impl: a CUDA device, a dtype and head size the backend serves, whole GQA groups,
// per-head vectors (ALiBi slopes, sinks) of num_heads entries or none, and an attention type the
// backend serves.
Status check_impl_params(const AttentionBackend& backend, const AttentionImplParams& params);

// The paged cache: [num_blocks, 2, block_size, Hkv, D] of cache_dtype on the layer's device, with a
// contiguous head dim, strided in the layer's kv_layout.
Status check_cache(const AttentionImplParams& params, DType cache_dtype,
                   const KVCacheView& kv_cache);

// do_kv_cache_update: the cache, and key/value in the layer's dtype.
Status check_cache_update(const AttentionImplParams& params, DType cache_dtype,
                          const TensorView& key, const TensorView& value,
                          const KVCacheView& kv_cache);

// forward: metadata built for this layer's spec (heads, dtypes, layout) and device, query/output
// rows, the optional LSE, the cache (with the builder's block size; an undefined one passes when
// cache_optional) and the FP8 scales.
Status check_forward(const AttentionImplParams& params, DType cache_dtype, const StepInfo& step,
                     const TensorView& query, const KVCacheView& kv_cache, const TensorView& output,
                     const TensorView& output_lse, const KVScales& scales,
                     bool cache_optional = false);

// The new tokens' key and value read as a ragged KV source: [>= num_actual_tokens, Hkv, D] of the
// layer's dtype on its device with a contiguous head dim, both with the same strides.
Status check_new_tokens(const AttentionImplParams& params, const StepInfo& step,
                        const TensorView& key, const TensorView& value);

}  // namespace pagedattn::gpu
