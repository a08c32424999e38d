// What this machine has: CUDA devices (empty when built without CUDA or none present).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagedattn/types.h"

namespace pagedattn {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  ComputeCapability capability;
  int64_t total_memory_bytes = 0;
  int num_sms = 0;
};

bool built_with_cuda();
// Asked once per process (devices do not come and go); every device fact comes from here.
const std::vector<CudaDeviceInfo>& cuda_devices();
// The device with this CUDA index, or nullptr when there is none.
const CudaDeviceInfo* cuda_device(int index);
// The best device present: CUDA device 0 if any, else the CPU.
Device default_device();

}  // namespace pagedattn
