// Shared by every GPU test: skip visibly where there is no CUDA device, and check CUDA calls.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace pagedattn::test {

inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace pagedattn::test

// First statement of every GPU test.
#define PAGEDATTN_REQUIRE_CUDA_DEVICE()                               \
  do {                                                                \
    if (!::pagedattn::test::cuda_device_present()) {                  \
      GTEST_SKIP() << "skipped: no CUDA device";                      \
    }                                                                 \
  } while (0)

#define PAGEDATTN_EXPECT_CUDA_OK(expr)                                          \
  do {                                                                          \
    cudaError_t pagedattn_err_ = (expr);                                        \
    ASSERT_EQ(pagedattn_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(pagedattn_err_); \
  } while (0)
