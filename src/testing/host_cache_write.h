// The tests' expected cache after a write: new tokens' K/V at their slots, on the host.
#pragma once

#include <cstdint>
#include <span>

#include "pagedattn/backend.h"
#include "pagedattn/tensor.h"

namespace pagedattn::testing {

// key/value [T, Hkv, D] (any float dtype, contiguous) written into `cache` (host, [blocks, 2,
// block_size, Hkv, D] with any strides) as semantics.md says: slot -1 skipped, FP8 = saturate(x /
// scale) rounded to nearest even (scale [1] or [Hkv]), other dtypes converted (exact when equal).
void write_tokens_on_host(const TensorView& key, const TensorView& value,
                          std::span<const int64_t> slots, const KVScales& scales,
                          const TensorView& cache);

}  // namespace pagedattn::testing
