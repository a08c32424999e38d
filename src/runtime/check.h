// Turning CUDA runtime errors into Status values: every CUDA call and launch is checked.
// Host header (needs cuda_runtime.h); usable from *_cuda.cc and *.cu files.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "pagedattn/status.h"

namespace pagedattn::runtime {

inline Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return ok_status();
  return Status(StatusCode::kCudaError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// After a <<<...>>> launch: reports a bad configuration or an earlier asynchronous error. Does not
// synchronise (graph capture stays legal).
inline Status check_launch(std::string_view kernel_name) {
  return cuda_status(cudaGetLastError(), std::string("launch of ") + std::string(kernel_name));
}

// Makes `device` current for the scope and restores the caller's device afterwards. When it is
// current already (the common case: build() runs once per step) the guard costs one
// cudaGetDevice and no cudaSetDevice.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : status_(activate(device)) {}
  ~ScopedDevice() {
    if (restore_) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  const Status& status() const { return status_; }

 private:
  Status activate(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ == device) return ok_status();
    restore_ = previous_ >= 0;
    return cuda_status(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }

  // Declared before status_: activate() sets them during status_'s init.
  int previous_ = -1;
  bool restore_ = false;
  Status status_;
};

}  // namespace pagedattn::runtime

#define PAGEDATTN_CUDA_RETURN_IF_ERROR(expr, what) \
  PAGEDATTN_RETURN_IF_ERROR(::pagedattn::runtime::cuda_status((expr), (what)))
