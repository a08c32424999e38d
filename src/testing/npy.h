// A minimal NumPy .npy writer (format 1.0, little-endian, C order) for `pagedattn check --dump`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "pagedattn/tensor.h"

namespace pagedattn::testing {

// Writes a contiguous host view of f32, i32, i64 or u8 elements.
Status write_npy(const std::string& path, const TensorView& view);
// Writes float32 values with the given shape (the product of shape must equal values.size()).
Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                     const std::vector<float>& values);
// The .npy header (magic, version, header dict, padding to 64 bytes) for `descr` ("<f4", ...).
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

}  // namespace pagedattn::testing
