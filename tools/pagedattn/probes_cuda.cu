// CUDA ceilings: DRAM read bandwidth (16-byte loads over a buffer far larger than L2) and the
// bf16 mma.sync rate (the instruction the v2 attention kernels use), both timed with CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/check.h"
#include "probes.h"

namespace pagedattn::cli {
namespace {

__global__ void read_kernel(const uint4* __restrict__ data, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldg(data + i), b = __ldg(data + i + stride), c = __ldg(data + i + 2 * stride),
                d = __ldg(data + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldg(data + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // practically never: keeps the loads alive
}

constexpr int kMmaChains = 8;

__global__ void mma_kernel(int iterations, float* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t a = 0x3C003C00u + (threadIdx.x & 7), b = 0x3C003C00u + (threadIdx.x >> 3);
  float c[kMmaChains][4] = {};
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int k = 0; k < kMmaChains; ++k) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
    }
  }
  float s = 0.0f;
  for (auto& chain : c) s += chain[0] + chain[1] + chain[2] + chain[3];
  if (s == 1234.5f) *sink = s;
#endif
}

// Best of `passes` timings of launch(), in milliseconds; negative on a CUDA error.
template <typename Launch>
float best_ms(int passes, Launch launch) {
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return -1.0f;
  float best = 1e30f;
  for (int p = 0; p < passes; ++p) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    if (cudaEventSynchronize(stop) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
      best = -1.0f;
      break;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

int sm_count(int device) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return std::max(sms, 1);
}

}  // namespace

Ceiling measure_cuda_read_bandwidth(int device_index, bool quick) {
  runtime::ScopedDevice guard(device_index);
  if (!guard.status().ok()) return {0.0, "not measured: " + guard.status().message()};
  const size_t bytes = quick ? (size_t{1} << 30) : (size_t{4} << 30);
  void* buffer = nullptr;
  uint32_t* sink = nullptr;
  if (cudaMalloc(&buffer, bytes) != cudaSuccess ||
      cudaMalloc(&sink, sizeof(uint32_t)) != cudaSuccess) {
    cudaFree(buffer);
    return {0.0, "not measured: cudaMalloc failed"};
  }
  cudaMemset(buffer, 0x3C, bytes);
  const size_t n = bytes / sizeof(uint4);
  const int blocks = sm_count(device_index) * 8;
  const float ms = best_ms(quick ? 3 : 10, [&] {
    read_kernel<<<blocks, 512>>>(static_cast<const uint4*>(buffer), n, sink);
  });
  cudaFree(buffer);
  cudaFree(sink);
  if (ms <= 0.0f) return {0.0, "not measured: the read kernel failed"};
  return {static_cast<double>(bytes) / (ms * 1e-3) / 1e9,
          "16-byte loads over a " + std::to_string(bytes >> 20) + " MiB buffer, best of passes"};
}

Ceiling cuda_matmul_ceiling(int device_index) {
  runtime::ScopedDevice guard(device_index);
  if (!guard.status().ok()) return {0.0, "not measured: " + guard.status().message()};
  float* sink = nullptr;
  if (cudaMalloc(&sink, sizeof(float)) != cudaSuccess)
    return {0.0, "not measured: cudaMalloc failed"};
  const int blocks = sm_count(device_index) * 4, threads = 256, iterations = 2048;
  const float ms = best_ms(3, [&] { mma_kernel<<<blocks, threads>>>(iterations, sink); });
  cudaFree(sink);
  if (ms <= 0.0f) return {0.0, "not measured: the mma kernel failed (needs sm_80+)"};
  // Each m16n8k16 mma is 2 * 16 * 8 * 16 flops per warp.
  const double flops = 2.0 * 16 * 8 * 16 * kMmaChains * static_cast<double>(iterations) *
                       (static_cast<double>(blocks) * threads / 32);
  return {flops / (ms * 1e-3) / 1e9,
          "bf16 mma.sync m16n8k16 with f32 accumulation, register operands (the v2 kernels' "
          "instruction; Hopper wgmma peaks higher)"};
}

}  // namespace pagedattn::cli
