// Element access into strided host views and flat host scratch, for the host combine paths.
#pragma once

#include <cstdint>
#include <vector>

#include "pagedattn/tensor.h"

namespace pagedattn::dcp {

inline int64_t offset2(const TensorView& x, int64_t i, int64_t j) {
  return i * x.stride(0) + j * x.stride(1);
}
inline int64_t offset3(const TensorView& x, int64_t i, int64_t j, int64_t k) {
  return i * x.stride(0) + j * x.stride(1) + k * x.stride(2);
}

// Host scratch of `count` elements of `dtype`, viewed flat.
struct HostScratch {
  HostScratch(DType dtype, int64_t count)
      : bytes(static_cast<size_t>(count) * dtype_size(dtype)),
        view(bytes.data(), dtype, Device::cpu(), {count}) {}
  std::vector<char> bytes;
  TensorView view;
};

}  // namespace pagedattn::dcp
