// What this build and machine offer.
#include "pagedattn/device_info.h"

#include "pagedattn/config.h"

namespace pagedattn {

bool built_with_cuda() {
  return PAGEDATTN_WITH_CUDA != 0;
}

#if !PAGEDATTN_WITH_CUDA
const std::vector<CudaDeviceInfo>& cuda_devices() {
  static const std::vector<CudaDeviceInfo> none;
  return none;
}
#endif

const CudaDeviceInfo* cuda_device(int index) {
  for (const CudaDeviceInfo& info : cuda_devices()) {
    if (info.index == index) return &info;
  }
  return nullptr;
}

Device default_device() {
  return cuda_devices().empty() ? Device::cpu() : Device::cuda(0);
}

}  // namespace pagedattn
