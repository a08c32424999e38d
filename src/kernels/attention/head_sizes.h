// The head sizes with a compiled kernel instantiation. The list comes from the build
// (PAGEDATTN_KERNEL_HEAD_SIZES in built_head_sizes.h, written by src/CMakeLists.txt from the
// generated instantiation files that PAGEDATTN_HEAD_SIZES keeps), so this header, the
// launcher's dispatch and CMake cannot disagree. Host-only header.
#pragma once

#include "kernels/attention/built_head_sizes.h"

namespace pagedattn::kernels {

template <int... kSizes>
struct HeadSizeList {
  static constexpr int kCount = sizeof...(kSizes);
  static constexpr int kValues[kCount + 1] = {kSizes..., 0};  // 0 keeps the array non-empty
};

#if defined(PAGEDATTN_KERNEL_HEAD_SIZES)
using BuiltHeadSizes = HeadSizeList<PAGEDATTN_KERNEL_HEAD_SIZES>;
#else
using BuiltHeadSizes = HeadSizeList<>;  // no CUDA: no kernels
#endif

}  // namespace pagedattn::kernels
