// Shared by the Hopper (sm_90a) tests: skip visibly on other devices, and small typed device
// arrays.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/gpu/generation.h"
#include "cuda_test_support.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/attention/v3/launch.h"
#include "runtime/current_device.h"

namespace pagedattn::test {

inline bool hopper_device_present() {
  const StatusOr<const CudaDeviceInfo*> device = runtime::current_cuda_device();
  return device.ok() && (*device)->capability.major == 9 && (*device)->capability.minor == 0;
}

// The v3 head sizes this build has.
inline std::vector<int> v3_head_sizes_built() {
  std::vector<int> sizes;
  for (int d : {64, 96, 128, 192, 256}) {
    if (kernels::paged_attention_head_size_built(d)) sizes.push_back(d);
  }
  return sizes;
}

// Launches through the one dispatch point with generation v3 selected.
inline Status launch_v3(const kernels::PagedAttentionParams& params, void* stream) {
  kernels::PagedAttentionParams p = params;
  p.generation = kernels::KernelGeneration::kV3;
  return kernels::launch_paged_attention(p, stream);
}

// Launches v3 on at most kMaxCtas persistent CTAs (launch.h's test hook, past the dispatch: only
// for parameters the dispatch accepts), so that each CTA walks many work tiles across requests and
// heads; kPackGqa: with GQA packing.
template <int kMaxCtas, bool kPackGqa = false>
Status launch_v3_few_ctas(const kernels::PagedAttentionParams& params, void* stream) {
  kernels::PagedAttentionParams p = params;
  p.generation = kernels::KernelGeneration::kV3;
  p.pack_gqa = kPackGqa;
  return kernels::detail::launch_paged_attention_v3_few_ctas(p, p.head_size, stream, kMaxCtas);
}
inline constexpr auto launch_v3_three_ctas = &launch_v3_few_ctas<3>;
// GQA packing (PagedAttentionParams::pack_gqa, which the backends set per pass) through the
// dispatch, and on three CTAs.
inline Status launch_v3_packed(const kernels::PagedAttentionParams& params, void* stream) {
  kernels::PagedAttentionParams p = params;
  p.pack_gqa = true;
  return launch_v3(p, stream);
}
inline constexpr auto launch_v3_packed_three_ctas = &launch_v3_few_ctas<3, true>;

// Launches as the GPU backends do with v3 preferred (backends/gpu/generation.h), for a pass whose
// gpu::pass_kernel is kKernel; an Internal status unless the rule chose kExpected (and GQA packing
// exactly where kKernel asks for it under v3), so a test sees the rule and the launch together.
template <gpu::PassKernel kKernel, kernels::KernelGeneration kExpected>
Status launch_as_the_backends_choose(const kernels::PagedAttentionParams& params, void* stream) {
  kernels::PagedAttentionParams p = params;
  gpu::LaunchGenerations generations(kernels::KernelGeneration::kV3, /*forced=*/false);
  generations.choose(p, kKernel);
  const bool packed =
      kExpected == kernels::KernelGeneration::kV3 && kKernel != gpu::PassKernel::kV3;
  if (p.generation != kExpected || p.pack_gqa != packed) {
    return internal_error(
        "the generation rule chose v" + std::to_string(static_cast<int>(p.generation)) +
        (p.pack_gqa ? " packed" : "") + " at block_size " + std::to_string(p.block_size) + ": " +
        kernels::paged_attention_serves(p).to_string());
  }
  return kernels::launch_paged_attention(p, stream);
}

// A cudaMalloc'ed array of n Ts (zeroed), or a copy of a host vector.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (cudaMalloc(&ptr_, n * sizeof(T)) == cudaSuccess) cudaMemset(ptr_, 0, n * sizeof(T));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }
  T* get() const { return ptr_; }
  std::vector<T> to_host() const {
    std::vector<T> host(n_);
    cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

}  // namespace pagedattn::test

// First statement of every test that runs sm_90a code (the primitives).
#define PAGEDATTN_REQUIRE_HOPPER_DEVICE()                               \
  do {                                                                  \
    if (!::pagedattn::test::hopper_device_present()) {                  \
      GTEST_SKIP() << "skipped: no compute capability 9.0 CUDA device"; \
    }                                                                   \
  } while (0)

// First statement of every test that runs the v3 kernel: a 9.0 device and a build with 90a.
#define PAGEDATTN_REQUIRE_V3()                                                                    \
  do {                                                                                            \
    PAGEDATTN_REQUIRE_HOPPER_DEVICE();                                                            \
    if (!::pagedattn::kernels::paged_attention_generation_built(                                  \
            ::pagedattn::kernels::KernelGeneration::kV3)) {                                       \
      GTEST_SKIP() << "skipped: kernel generation v3 not built (PAGEDATTN_CUDA_ARCHS lacks 90a)"; \
    }                                                                                             \
  } while (0)
