// Host interface of the KV-cache write kernel (vLLM's reshape_and_cache_flash).
#pragma once

#include "pagedattn/kv_cache.h"
#include "pagedattn/tensor.h"

namespace pagedattn::kernels {

// key/value [T, Hkv, D] (f16/bf16/f32) into kv_cache's planes (NHD or HND strides) at
// slot_mapping [T] int64 (-1 skipped); FP8 caches encode saturate(x / scale) with RNE,
// bit-identical to the host encoder in common/numeric.h. k_scale/v_scale: f32 [1] or [Hkv], or
// undefined (1.0). All tensors on one CUDA device.
Status launch_cache_write(const TensorView& key, const TensorView& value,
                          const KVCacheView& kv_cache, const TensorView& slot_mapping,
                          const TensorView& k_scale, const TensorView& v_scale, void* stream);

}  // namespace pagedattn::kernels
