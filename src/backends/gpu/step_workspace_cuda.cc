#include "backends/gpu/step_workspace.h"

#include <string>

#include "runtime/check.h"

namespace pagedattn::gpu {

StatusOr<std::unique_ptr<StepWorkspace>> StepWorkspace::allocate(
    int device, const plan::WorkspaceLayout& layout) {
  std::unique_ptr<StepWorkspace> w(new StepWorkspace());
  w->layout_ = layout;
  PAGEDATTN_ASSIGN_OR_RETURN(w->ints_, runtime::DeviceBuffer::allocate(device, layout.int_bytes));
  PAGEDATTN_ASSIGN_OR_RETURN(
      w->partial_out_, runtime::DeviceBuffer::allocate(device, 4 * layout.partial_out_floats));
  PAGEDATTN_ASSIGN_OR_RETURN(
      w->partial_lse_, runtime::DeviceBuffer::allocate(device, 4 * layout.partial_lse_floats));
  runtime::ScopedDevice guard(device);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  for (int i = 0; i < 2; ++i) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(reinterpret_cast<void**>(&w->mirrors_[i]), layout.int_bytes,
                      cudaHostAllocDefault),
        "cudaHostAlloc of the " + std::to_string(layout.int_bytes) + "-byte plan mirror");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&w->copied_[i], cudaEventDisableTiming), "creating an event");
  }
  return w;
}

StepWorkspace::~StepWorkspace() {
  for (int i = 0; i < 2; ++i) {  // a destructor cannot report; these fail only on a broken context
    if (copied_[i] != nullptr) cudaEventDestroy(copied_[i]);
    if (mirrors_[i] != nullptr) cudaFreeHost(mirrors_[i]);
  }
}

StatusOr<char*> StepWorkspace::begin_step() {
  current_ ^= 1;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(copied_[current_]),
                                 "waiting for the previous plan copy");
  return mirrors_[current_];
}

Status StepWorkspace::upload(int64_t bytes) {
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(ints_.data(), mirrors_[current_], bytes, cudaMemcpyHostToDevice, nullptr),
      "copying the step plan");
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(copied_[current_], nullptr),
                                 "recording the plan copy");
  return ok_status();
}

}  // namespace pagedattn::gpu
