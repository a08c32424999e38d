// A GPU builder's persistent step workspace (plan/workspace.h layout): the device int part and its two
// pinned host mirrors, used in turn, so that a step's host planning never overwrites bytes a
// previous step's copy has not read yet; and the decode partials. Needs the CUDA runtime (include
// from *_cuda.cc only). Copies go on the legacy default stream, as the GPU layer's other step
// buffers do (backends/gpu/step_buffers.h says what that orders). The plan is written in place:
// planning into a cached host scratch and moving it into a mirror afterwards (memcpy or streaming
// stores) made build() slower on the H200 host.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <span>

#include "plan/workspace.h"
#include "runtime/device_buffer.h"

namespace pagedattn::gpu {

class StepWorkspace {
 public:
  static StatusOr<std::unique_ptr<StepWorkspace>> allocate(int device,
                                                           const plan::WorkspaceLayout& layout);
  StepWorkspace(const StepWorkspace&) = delete;
  StepWorkspace& operator=(const StepWorkspace&) = delete;
  ~StepWorkspace();

  // The mirror the next step fills (after its previous copy has completed).
  StatusOr<char*> begin_step();
  // One cudaMemcpyAsync of the mirror's first `bytes` to the device.
  Status upload(int64_t bytes);

  const plan::WorkspaceLayout& layout() const { return layout_; }
  // count elements of T at byte `offset` of a host mirror (from begin_step) or of the device part.
  template <typename T>
  static std::span<T> region(char* base, int64_t offset, int64_t count) {
    return {reinterpret_cast<T*>(base + offset), static_cast<size_t>(count)};
  }
  const char* device_ints() const { return ints_.as<const char>(); }
  float* partial_out() const { return partial_out_.as<float>(); }
  float* partial_lse() const { return partial_lse_.as<float>(); }

 private:
  StepWorkspace() = default;

  plan::WorkspaceLayout layout_;
  runtime::DeviceBuffer ints_, partial_out_, partial_lse_;
  char* mirrors_[2] = {nullptr, nullptr};  // cudaHostAlloc'd, layout_.int_bytes each
  cudaEvent_t copied_[2] = {nullptr, nullptr};
  int current_ = 1;
};

}  // namespace pagedattn::gpu
