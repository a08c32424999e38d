#include "runtime/current_device.h"

#include <cuda_runtime.h>

#include <string>

#include "runtime/check.h"

namespace pagedattn::runtime {

StatusOr<const CudaDeviceInfo*> current_cuda_device() {
  int index = 0;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&index), "cudaGetDevice");
  const CudaDeviceInfo* info = cuda_device(index);
  if (info == nullptr) {
    return Status(StatusCode::kCudaError,
                  "the current CUDA device " + std::to_string(index) + " is not in cuda_devices()");
  }
  return info;
}

}  // namespace pagedattn::runtime
