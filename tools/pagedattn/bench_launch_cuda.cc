// The launch overhead of forward on a CUDA device, measured with the device held busy so that the
// host's issuing and the device's running are each timed alone (bench_measure.h).
#include <cuda_runtime.h>

#include <chrono>

#include "bench_measure.h"
#include "runtime/check.h"
#include "runtime/device_buffer.h"

namespace pagedattn::cli {
namespace {

// The hold: memsets of a scratch buffer on the stream forward runs on. 48 x 1 GiB keeps an H200
// busy for about 15 ms, several times what the host needs to issue the timed calls.
constexpr size_t kHoldBytes = size_t{1} << 30;
constexpr int kHoldMemsets = 48;

}  // namespace

Status measure_held_launch(testing::StepRunner& run, LaunchCost& cost) {
  const int device = run.device().index;
  runtime::ScopedDevice guard(device);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  PAGEDATTN_ASSIGN_OR_RETURN(runtime::DeviceBuffer scratch,
                             runtime::DeviceBuffer::allocate(device, kHoldBytes));
  cudaEvent_t start = nullptr, stop = nullptr;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  Status status = runtime::cuda_status(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < kHoldMemsets && status.ok(); ++i) {
    status = runtime::cuda_status(cudaMemsetAsync(scratch.data(), i, kHoldBytes), "holding memset");
  }
  if (status.ok()) status = runtime::cuda_status(cudaEventRecord(start), "cudaEventRecord");
  const auto issue_start = std::chrono::steady_clock::now();
  for (int i = 0; i < cost.calls && status.ok(); ++i) status = run.forward(false);
  const auto issued = std::chrono::steady_clock::now();
  cost.held = cudaEventQuery(start) == cudaErrorNotReady;
  (void)cudaGetLastError();  // "not ready" is an answer, not an error for the next launch check
  if (status.ok()) status = runtime::cuda_status(cudaEventRecord(stop), "cudaEventRecord");
  if (status.ok())
    status = runtime::cuda_status(cudaEventSynchronize(stop), "waiting for the calls");
  float ms = 0.0f;
  if (status.ok()) {
    status = runtime::cuda_status(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  }
  cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  PAGEDATTN_RETURN_IF_ERROR(status);
  cost.host_us =
      std::chrono::duration<double, std::micro>(issued - issue_start).count() / cost.calls;
  cost.device_us = 1e3 * ms / cost.calls;
  return ok_status();
}

}  // namespace pagedattn::cli
