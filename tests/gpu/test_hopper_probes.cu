// A measurement of the H200, not a test of ours: does one warpgroup streaming e4m3 wgmmas slow
// another warpgroup's exponentials or FMAs on the same SM? The v3 prefill kernels' turn traces
// (docs/kernels.md, FP8 prefill, tenth session) show each consumer's softmax running at about half
// the rate its instructions allow while the other consumer's products run; one explanation is the
// wgmma accumulators' register-file traffic. One CTA of two warpgroups per SM: warpgroup 0 issues
// batches of four m64n128k32 wgmmas (SS or RS, at most two batches queued) or nothing; warpgroup 1
// runs 16 dependent chains of ex2 (MUFU) or FFMA, or nothing. Each times itself with the SM clock;
// CTA 0's figures are printed. Disabled: run with --gtest_also_run_disabled_tests
// --gtest_filter='HopperProbes.*'. Built for sm_90a only (tests/hopper.cmake). Measured (H200,
// eleventh session): ex2 8.46 cycles per warp instruction alone, 13.1 beside SS and 13.7 beside RS
// wgmmas; FFMA 1.19 alone, 1.66 beside; the wgmmas keep their rate (docs/kernels.md).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_test_support.h"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/wgmma.cuh"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

constexpr int kIters = 1024, kChains = 16, kBatches = 3000;

__device__ __forceinline__ long long clock_after(float dependency) {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : "f"(dependency) : "memory");
  return t;
}

enum class Tensor { kNone, kShared, kRegisterA };
enum class Work { kNone, kEx2, kFfma };

// out[0]: warpgroup 0's cycles, out[1]: warpgroup 1's.
template <Tensor kTensor, Work kWork>
__global__ void __launch_bounds__(256, 1) wgmma_beside_work(long long* out, float seed) {
  __shared__ __align__(1024) uint8_t smem[8192 + 16384];  // A: 64 x 128 bytes, B: 128 x 128
  for (int i = threadIdx.x; i < (8192 + 16384) / 4; i += 256) {
    reinterpret_cast<uint32_t*>(smem)[i] = 0x30303030u;  // e4m3 0.5
  }
  device::fence_proxy_async_shared();
  __syncthreads();
  float result = 0.0f;
  const long long start = clock_after(0.0f);
  if (threadIdx.x < 128 && kTensor != Tensor::kNone) {
    float d[64];
    for (float& x : d) x = 0.0f;
    const uint32_t a[4] = {0x30303030u, 0x30303030u, 0x30303030u, 0x30303030u};
    const uint64_t desc_a = device::wgmma_desc_sw128(device::smem_addr(smem), 16, 1024);
    const uint64_t desc_b = device::wgmma_desc_sw128(device::smem_addr(smem + 8192), 16, 1024);
    for (int b = 0; b < kBatches; ++b) {
      device::wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint64_t bk = device::wgmma_desc_advance(desc_b, 32 * k);
        if constexpr (kTensor == Tensor::kShared) {
          device::wgmma_k32_e4m3_ss(d, device::wgmma_desc_advance(desc_a, 32 * k), bk, true);
        } else {
          device::wgmma_k32_e4m3_rs(d, a, bk, true);
        }
      }
      device::wgmma_commit_group();
      device::wgmma_wait_group<1>();
    }
    device::wgmma_wait_group<0>();
    device::wgmma_fence_operands(d);
    for (float x : d) result += x;
  } else if (threadIdx.x >= 128 && kWork != Work::kNone) {
    float x[kChains];
    for (int c = 0; c < kChains; ++c) x[c] = seed - 0.01f * c - 1e-5f * threadIdx.x;
    for (int i = 0; i < kIters; ++i) {
#pragma unroll
      for (int c = 0; c < kChains; ++c) {
        if constexpr (kWork == Work::kEx2) {
          float y;
          asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x[c]));
          x[c] = y * -0.5f;
        } else {
          x[c] = fmaf(x[c], 0.999f, 0.001f);
        }
      }
    }
    for (float v : x) result += v;
  }
  const long long cycles = clock_after(result) - start;
  if (blockIdx.x == 0 && threadIdx.x % 128 == 0) out[threadIdx.x / 128] = cycles;
  if (result == 12345.0f) out[2] = 1;  // keeps the work
}

template <Tensor kTensor, Work kWork>
void report(const char* name) {
  DeviceArray<long long> out(3);
  cudaMemset(out.get(), 0, 3 * sizeof(long long));
  wgmma_beside_work<kTensor, kWork><<<132, 256>>>(out.get(), 0.3f);
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<long long> c = out.to_host();
  const double flops = kTensor == Tensor::kNone ? 0.0 : double(kBatches) * 4 * 2 * 64 * 128 * 32;
  std::printf("PROBE %-16s tensor %5.0f FLOP/cycle/SM  work %6.2f cycles per warp instruction\n",
              name, c[0] > 0 ? flops / c[0] : 0.0,
              kWork == Work::kNone ? 0.0 : double(c[1]) / (double(kIters) * kChains));
}

TEST(HopperProbes, DISABLED_WgmmaBesideOtherWarpgroup) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  for (int round = 0; round < 2; ++round) {
    report<Tensor::kShared, Work::kNone>("SS alone");
    report<Tensor::kRegisterA, Work::kNone>("RS alone");
    report<Tensor::kNone, Work::kEx2>("ex2 alone");
    report<Tensor::kShared, Work::kEx2>("ex2 beside SS");
    report<Tensor::kRegisterA, Work::kEx2>("ex2 beside RS");
    report<Tensor::kNone, Work::kFfma>("ffma alone");
    report<Tensor::kShared, Work::kFfma>("ffma beside SS");
    report<Tensor::kRegisterA, Work::kFfma>("ffma beside RS");
  }
}

}  // namespace
}  // namespace pagedattn::test
