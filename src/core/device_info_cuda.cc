// CUDA device discovery. No driver or no device gives an empty list, never an error.
#include <cuda_runtime.h>

#include "pagedattn/device_info.h"

namespace pagedattn {
namespace {

std::vector<CudaDeviceInfo> query_devices() {
  std::vector<CudaDeviceInfo> devices;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" / "no device" error
    return devices;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    CudaDeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.capability = {prop.major, prop.minor};
    info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.num_sms = prop.multiProcessorCount;
    devices.push_back(std::move(info));
  }
  return devices;
}

}  // namespace

const std::vector<CudaDeviceInfo>& cuda_devices() {
  static const std::vector<CudaDeviceInfo> devices = query_devices();
  return devices;
}

}  // namespace pagedattn
