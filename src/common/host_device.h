// Marks functions that both the CUDA kernels and host code (CPU kernel, float64 oracle, planner,
// benchmarks) call, so that one definition serves both. Host-only builds see plain functions.
#pragma once

#if defined(__CUDACC__)
#define PAGEDATTN_HOST_DEVICE __host__ __device__
#else
#define PAGEDATTN_HOST_DEVICE
#endif
