// The device in-process group's collectives as kernels: reduce_scatter sums this rank's chunk of
// every rank's send buffer; all_gather and all_to_all gather one chunk of each. Grid-stride loops.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/float_elements.cuh"
#include "dcp/in_process_kernels.h"
#include "runtime/check.h"

namespace pagedattn::dcp {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

struct RankBuffers {  // by value: one kernel argument holds every rank's pointer
  const void* sends[kMaxDeviceGroupRanks];
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rank_sum_kernel(RankBuffers buffers, int ranks, int64_t first, T* recv, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < ranks; ++s) {
      sum = __fadd_rn(sum, element_to_float(static_cast<const T*>(buffers.sends[s])[first + i]));
    }
    recv[i] = element_from_float<T>(sum);
  }
}

template <typename T>
Status launch_typed(const RankBuffers& buffers, int ranks, int64_t first, void* recv, int64_t count,
                    cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks)));
  rank_sum_kernel<T>
      <<<grid, kThreads, 0, stream>>>(buffers, ranks, first, static_cast<T*>(recv), count);
  return runtime::check_launch("rank_sum_kernel");
}

// Chunk s of recv from sends[s] + first, 16 bytes a thread where every address allows, else bytes.
template <typename Unit>
__global__ void __launch_bounds__(kThreads)
    rank_gather_kernel(RankBuffers buffers, int ranks, int64_t first, Unit* recv, int64_t units) {
  const int64_t total = units * ranks;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t s = i / units, j = i % units;
    recv[i] = static_cast<const Unit*>(buffers.sends[s])[first + j];
  }
}

template <typename Unit>
Status launch_gather_units(const RankBuffers& buffers, int ranks, int64_t first, void* recv,
                           int64_t units, cudaStream_t stream) {
  const int64_t total = units * ranks;
  const dim3 grid(
      static_cast<unsigned>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, kMaxBlocks)));
  rank_gather_kernel<Unit>
      <<<grid, kThreads, 0, stream>>>(buffers, ranks, first, static_cast<Unit*>(recv), units);
  return runtime::check_launch("rank_gather_kernel");
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

StatusOr<RankBuffers> rank_buffers(std::span<const void* const> sends, const char* collective) {
  if (sends.size() > static_cast<size_t>(kMaxDeviceGroupRanks)) {
    return invalid_argument(std::string(collective) + " over " + std::to_string(sends.size()) +
                            " ranks; the device group serves at most " +
                            std::to_string(kMaxDeviceGroupRanks));
  }
  RankBuffers buffers{};
  std::copy(sends.begin(), sends.end(), buffers.sends);
  return buffers;
}

}  // namespace

Status launch_rank_gather(std::span<const void* const> sends, int64_t first, void* recv,
                          int64_t bytes, void* stream) {
  PAGEDATTN_ASSIGN_OR_RETURN(const RankBuffers buffers, rank_buffers(sends, "a gather"));
  if (bytes == 0) return ok_status();
  const int ranks = static_cast<int>(sends.size());
  const auto s = static_cast<cudaStream_t>(stream);
  bool vectors = bytes % 16 == 0 && first % 16 == 0 && aligned16(recv);
  for (const void* send : sends) vectors = vectors && aligned16(send);
  if (vectors) return launch_gather_units<uint4>(buffers, ranks, first / 16, recv, bytes / 16, s);
  return launch_gather_units<unsigned char>(buffers, ranks, first, recv, bytes, s);
}

Status launch_rank_sum(std::span<const void* const> sends, int64_t first, void* recv, int64_t count,
                       DType dtype, void* stream) {
  PAGEDATTN_ASSIGN_OR_RETURN(const RankBuffers buffers, rank_buffers(sends, "reduce_scatter"));
  if (count == 0) return ok_status();
  const int ranks = static_cast<int>(sends.size());
  const auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kF32: return launch_typed<float>(buffers, ranks, first, recv, count, s);
    case DType::kF16: return launch_typed<__half>(buffers, ranks, first, recv, count, s);
    case DType::kBF16: return launch_typed<__nv_bfloat16>(buffers, ranks, first, recv, count, s);
    default:
      return invalid_argument("reduce_scatter sums f32, f16 or bf16; got " +
                              std::string(dtype_name(dtype)));
  }
}

}  // namespace pagedattn::dcp
