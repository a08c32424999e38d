// Storing the kernel's float results in the output's dtype, rounded to nearest even.
#pragma once

#include <cstdint>

#include "pagedattn/types.h"

namespace pagedattn::cpu {

// dst[offset + d] = src[d] * multiplier for d in [0, n), as f32, bf16 or f16 (the output dtypes).
void store_output_row(const float* src, int n, float multiplier, DType dtype, void* dst,
                      int64_t offset);

}  // namespace pagedattn::cpu
