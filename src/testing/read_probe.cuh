// DRAM read probes: kernels that only read a buffer, whose rate is the ceiling the bandwidth-bound
// kernels (the decodes) are measured against. Shared by the CLI's `ceilings` and DecodeBench, so
// both report the same ceiling. Two kinds: 16-byte __ldg loads (4 per thread in flight, 2048
// threads per SM) and TMA bulk copies (cp.async.bulk global -> shared, sm_90): one thread per CTA
// keeps `stages` chunks in flight, so the bytes in flight per SM are set directly and cost no
// registers. The ceiling is the best of them.
#pragma once

#include <cuda_runtime.h>
#include <cuda/ptx>

#include <algorithm>
#include <cstdint>

#include "runtime/current_device.h"

namespace pagedattn::testing {

__global__ void ldg_read_kernel(const uint4* __restrict__ data, size_t n, uint32_t* sink) {
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

// Chunk c of the buffer goes to CTA c % gridDim.x (neighbouring chunks read at the same time),
// into stage k % stages of that CTA's k-th chunk; a stage is reused once its previous copy landed.
__global__ void bulk_read_kernel(const char* __restrict__ data, size_t bytes, int chunk_bytes,
                                 int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) char smem[];
  auto* bars = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(stages) * chunk_bytes);
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) cuda::ptx::mbarrier_init(bars + s, 1);
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  const size_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  auto wait = [&](int k) {
    while (!cuda::ptx::mbarrier_try_wait_parity(bars + k % stages, (k / stages) & 1)) {
    }
  };
  int k = 0;
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x, ++k) {
    if (k >= stages) wait(k - stages);
    const size_t offset = c * chunk_bytes;
    const uint32_t size = static_cast<uint32_t>(
        bytes - offset < static_cast<size_t>(chunk_bytes) ? bytes - offset : chunk_bytes);
    uint64_t* bar = bars + k % stages;
    (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                               cuda::ptx::space_shared, bar, size);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                             smem + static_cast<size_t>(k % stages) * chunk_bytes, data + offset,
                             size, bar);
  }
  for (int j = k > stages ? k - stages : 0; j < k; ++j) wait(j);  // no copy outlives the CTA
#else
  __trap();
#endif
}

// A bulk probe's shape: CTAs per SM and each CTA's stages of chunk_bytes (the bytes in flight per
// SM are their product).
struct BulkReadShape {
  int ctas_per_sm;
  int stages;
  int chunk_bytes;
};
inline constexpr BulkReadShape kBulkReadShapes[] = {
    {1, 8, 16384}, {1, 12, 16384}, {2, 6, 16384}, {4, 4, 8192}, {1, 6, 32768}};

inline int read_probe_sms() {
  const StatusOr<const CudaDeviceInfo*> device = runtime::current_cuda_device();
  return device.ok() ? std::max((*device)->num_sms, 1) : 1;
}

// Whether the current device runs the bulk probe (compute capability 9 or later).
inline bool bulk_read_supported() {
  const StatusOr<const CudaDeviceInfo*> device = runtime::current_cuda_device();
  return device.ok() && (*device)->capability.major >= 9;
}

// `bytes` (a multiple of 16) from `data` (16-byte aligned). sink: any writable uint32_t.
inline void launch_ldg_read(const void* data, size_t bytes, uint32_t* sink,
                            cudaStream_t stream = nullptr) {
  ldg_read_kernel<<<read_probe_sms() * 8, 512, 0, stream>>>(static_cast<const uint4*>(data),
                                                            bytes / 16, sink);
}

inline cudaError_t launch_bulk_read(const void* data, size_t bytes, const BulkReadShape& shape,
                                    cudaStream_t stream = nullptr) {
  const int smem = shape.stages * shape.chunk_bytes + shape.stages * 8;
  cudaError_t err =
      cudaFuncSetAttribute(bulk_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  bulk_read_kernel<<<read_probe_sms() * shape.ctas_per_sm, 32, smem, stream>>>(
      static_cast<const char*>(data), bytes, shape.chunk_bytes, shape.stages);
  return cudaGetLastError();
}

}  // namespace pagedattn::testing
