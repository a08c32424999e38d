// CUDA ceilings: DRAM read bandwidth (the best of the read probes of testing/read_probe.cuh over a
// buffer far larger than L2) and the bf16 mma.sync rate (the instruction the v2 attention kernels
// use), both timed with CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "pagedattn/device_info.h"
#include "probes.h"
#include "runtime/check.h"
#include "testing/read_probe.cuh"

namespace pagedattn::cli {
namespace {

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
  const CudaDeviceInfo* info = cuda_device(device);
  return info != nullptr ? std::max(info->num_sms, 1) : 1;
}

}  // namespace

Ceiling measure_cuda_read_bandwidth(int device_index) {
  runtime::ScopedDevice guard(device_index);
  if (!guard.status().ok()) return {0.0, "not measured: " + guard.status().message()};
  const size_t bytes = size_t{4} << 30;
  void* buffer = nullptr;
  uint32_t* sink = nullptr;
  if (cudaMalloc(&buffer, bytes) != cudaSuccess ||
      cudaMalloc(&sink, sizeof(uint32_t)) != cudaSuccess) {
    cudaFree(buffer);
    return {0.0, "not measured: cudaMalloc failed"};
  }
  cudaMemset(buffer, 0x3C, bytes);
  const int passes = 10;
  float ms = best_ms(passes, [&] { testing::launch_ldg_read(buffer, bytes, sink); });
  std::string how = "16-byte loads";
  if (testing::bulk_read_supported()) {
    for (const testing::BulkReadShape& s : testing::kBulkReadShapes) {
      const float bulk =
          best_ms(passes, [&] { (void)testing::launch_bulk_read(buffer, bytes, s); });
      if (bulk > 0.0f && (ms <= 0.0f || bulk < ms)) {
        ms = bulk;
        how = "TMA bulk copies (" + std::to_string(s.ctas_per_sm) + " CTA/SM x " +
              std::to_string(s.stages) + " x " + std::to_string(s.chunk_bytes >> 10) + " KiB)";
      }
    }
  }
  cudaFree(buffer);
  cudaFree(sink);
  if (ms <= 0.0f) return {0.0, "not measured: the read kernel failed"};
  return {static_cast<double>(bytes) / (ms * 1e-3) / 1e9,
          "the best of 16-byte loads and TMA bulk copies over a " + std::to_string(bytes >> 20) +
              " MiB buffer, best of passes: " + how};
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
