// The facts of the calling thread's current CUDA device (cudaGetDevice), from cuda_devices().
#pragma once

#include "pagedattn/device_info.h"
#include "pagedattn/status.h"

namespace pagedattn::runtime {

StatusOr<const CudaDeviceInfo*> current_cuda_device();

}  // namespace pagedattn::runtime
