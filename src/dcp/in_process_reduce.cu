// The device in-process group's reduce_scatter: one grid-stride kernel over this rank's chunk,
// reading every rank's send buffer.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/float_elements.cuh"
#include "dcp/in_process_reduce.h"
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

}  // namespace

Status launch_rank_sum(std::span<const void* const> sends, int64_t first, void* recv, int64_t count,
                       DType dtype, void* stream) {
  if (sends.size() > static_cast<size_t>(kMaxDeviceGroupRanks)) {
    return invalid_argument("reduce_scatter over " + std::to_string(sends.size()) +
                            " ranks; the device group sums at most " +
                            std::to_string(kMaxDeviceGroupRanks));
  }
  if (count == 0) return ok_status();
  RankBuffers buffers{};
  std::copy(sends.begin(), sends.end(), buffers.sends);
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
