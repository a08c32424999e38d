// Measurements of the H200, not of our kernels (pagedattn_hopper_probes; sm_90a only).
// WgmmaBesideOtherWarpgroup: does one warpgroup streaming e4m3 wgmmas slow another warpgroup's
// exponentials or FMAs on the same SM? One CTA of two warpgroups per SM: warpgroup 0 issues
// batches of four m64n128k32 wgmmas (SS or RS, at most two batches queued) or nothing; warpgroup 1
// runs 16 dependent chains of ex2 (MUFU) or FFMA, or nothing. Each times itself with the SM clock;
// CTA 0's figures are printed. Bf16WgmmaRates: bf16 wgmma FLOP per cycle per SM at N 64 and 128,
// SS and RS, from one warpgroup or two, and beside a warpgroup storing to shared memory. The
// figures and what they mean for the v3 kernels are in docs/performance.md.
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

// One warpgroup's stream of kBatches batches of four wgmmas, at most two batches queued:
// issue(d, a_k, b_k) issues step k's product with A's and B's descriptors advanced to it (A at
// smem, B at smem + 8 KB, 128-byte-swizzled panels). Returns the sum of the accumulators.
template <int kRegs, typename Issue>
__device__ __forceinline__ float stream_wgmmas(uint8_t* smem, Issue issue) {
  float d[kRegs];
  for (float& x : d) x = 0.0f;
  const uint64_t desc_a = device::wgmma_desc_sw128(device::smem_addr(smem), 16, 1024);
  const uint64_t desc_b = device::wgmma_desc_sw128(device::smem_addr(smem + 8192), 16, 1024);
  for (int b = 0; b < kBatches; ++b) {
    device::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      issue(d, device::wgmma_desc_advance(desc_a, 32 * k),
            device::wgmma_desc_advance(desc_b, 32 * k));
    }
    device::wgmma_commit_group();
    device::wgmma_wait_group<1>();
  }
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(d);
  float sum = 0.0f;
  for (float x : d) sum += x;
  return sum;
}

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
    const uint32_t a[4] = {0x30303030u, 0x30303030u, 0x30303030u, 0x30303030u};
    result = stream_wgmmas<64>(smem, [&](float(&d)[64], uint64_t ak, uint64_t bk) {
      if constexpr (kTensor == Tensor::kShared) {
        device::wgmma_k32_e4m3_ss(d, ak, bk, true);
      } else {
        device::wgmma_k32_e4m3_rs(d, a, bk, true);
      }
    });
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

// bf16 wgmma rates (the v3 prefill at D 256 computes S by m64n64k16 SS: a 2 KB A slice and a 2 KB B
// slice from shared memory per 32 cycles of products, the shared memory's 128 bytes a cycle; does
// it run at the tensor pipe's rate?). kGroups warpgroups each stream batches of four m64n<kN>k16
// wgmmas (SS, or RS with A from registers); with kStores one more warpgroup stores 16 bytes per
// thread into shared memory in a loop, as TMA's writes would. out[0]: the slowest warpgroup's
// cycles.
template <int kN, bool kRs, int kGroups, bool kStores>
__global__ void __launch_bounds__(128 * (kGroups + 1), 1) bf16_wgmma_rate(long long* out) {
  extern __shared__ __align__(1024) uint8_t dyn[];
  uint8_t* smem = dyn + (1024 - device::smem_addr(dyn) % 1024) % 1024;  // A 8 KB, B 16 KB, 16 KB
  for (int i = threadIdx.x; i < 40960 / 4; i += blockDim.x) {
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u;  // small bf16 values
  }
  device::fence_proxy_async_shared();
  __syncthreads();
  const int group = threadIdx.x / 128;
  float result = 0.0f;
  const long long start = clock_after(0.0f);
  if (group < kGroups) {
    const uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    result = stream_wgmmas<kN / 2>(smem, [&](float(&d)[kN / 2], uint64_t ak, uint64_t bk) {
      if constexpr (kRs) {
        device::wgmma_k16_rs<__nv_bfloat16, 0>(d, a, bk, true);
      } else {
        device::wgmma_k16_ss<__nv_bfloat16, 0>(d, ak, bk, true);
      }
    });
  } else if (kStores) {
    uint4* dst = reinterpret_cast<uint4*>(smem + 24576) + threadIdx.x % 128;
    const uint4 v = make_uint4(threadIdx.x, 1, 2, 3);
    for (int i = 0; i < kBatches * 8; ++i) {
      dst[128 * (i % 8)] = v;
      asm volatile("" ::: "memory");
    }
  }
  const long long cycles = clock_after(result) - start;
  if (blockIdx.x == 0 && threadIdx.x % 128 == 0 && group < kGroups) atomicMax(&out[0], cycles);
  if (result == 12345.0f) out[1] = 1;  // keeps the work
}

template <int kN, bool kRs, int kGroups, bool kStores>
void report_rate(const char* name) {
  DeviceArray<long long> out(2);
  cudaMemset(out.get(), 0, 2 * sizeof(long long));
  auto kernel = bf16_wgmma_rate<kN, kRs, kGroups, kStores>;
  constexpr int smem = 40960 + 1024;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kernel<<<132, 128 * (kGroups + 1), smem>>>(out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<long long> c = out.to_host();
  const double flops = double(kGroups) * kBatches * 4 * 2 * 64 * kN * 16;
  std::printf("PROBE %-28s %5.0f FLOP/cycle/SM\n", name, c[0] > 0 ? flops / c[0] : 0.0);
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

TEST(HopperProbes, WgmmaBesideOtherWarpgroup) {
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

TEST(HopperProbes, Bf16WgmmaRates) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  for (int round = 0; round < 2; ++round) {
    report_rate<64, false, 1, false>("SS n64, one warpgroup");
    report_rate<64, false, 2, false>("SS n64, two warpgroups");
    report_rate<128, false, 1, false>("SS n128, one warpgroup");
    report_rate<128, false, 2, false>("SS n128, two warpgroups");
    report_rate<64, true, 2, false>("RS n64, two warpgroups");
    report_rate<128, true, 2, false>("RS n128, two warpgroups");
    report_rate<64, false, 2, true>("SS n64, two, beside stores");
    report_rate<128, false, 2, true>("SS n128, two, beside stores");
    report_rate<128, true, 2, true>("RS n128, two, beside stores");
  }
}

}  // namespace
}  // namespace pagedattn::test
