// Ceilings measured in the same run as a benchmark, so each figure has its roof beside it.
#pragma once

#include <string>

#include "pagedattn/config.h"
#include "pagedattn/types.h"

namespace pagedattn::cli {

struct Ceiling {
  double value = 0.0;  // GB/s or GFLOP/s
  std::string method;  // how it was measured (or where a constant comes from)
};

// The read-bandwidth ceiling of a device, measured one way for every tool: `bench` and `serve`
// report KV read rates against this one figure (the host probe or the CUDA probe below).
Ceiling measure_read_ceiling(const Device& device);
// "4690.1 GB/s (how it was measured)", or "not measured (why)"; `unit` e.g. "GB/s".
std::string describe_ceiling(const Ceiling& c, const std::string& unit);

// Host: all hardware threads summing a buffer larger than the last-level cache, allocated as the
// KV caches are (runtime/host_memory.h: huge pages where the kernel gives them); best of passes.
Ceiling measure_host_read_bandwidth();
// Host: the same threads reading blocks of `block_bytes` in shuffled order, each block's lines
// prefetching the next block's: the rate a paged KV cache's pattern allows (a block table
// scatters pages, and the hardware prefetchers restart at each).
Ceiling measure_host_paged_read_bandwidth(int block_bytes);
// Host: the rate of bf16 products accumulated in float32 (the precision of CPU_ATTN's dot products)
// of a register-blocked micro-kernel on cache-resident panels, all hardware threads, on the SIMD
// target CPU_ATTN runs (the same Highway dispatch).
Ceiling measure_host_dot_rate(bool quick);

#if PAGEDATTN_WITH_CUDA
// CUDA device: a vectorized read kernel over a buffer much larger than L2 (probes_cuda.cu).
Ceiling measure_cuda_read_bandwidth(int device_index);
// CUDA device: the dense bf16 tensor-core rate (a documented constant where not measured).
Ceiling cuda_matmul_ceiling(int device_index);
#endif

}  // namespace pagedattn::cli
