// What this build and machine offer.
#include "pagedattn/device_info.h"

#include "pagedattn/config.h"

namespace pagedattn {

bool built_with_cuda() {
  return PAGEDATTN_WITH_CUDA != 0;
}

#if !PAGEDATTN_WITH_CUDA
std::vector<CudaDeviceInfo> cuda_devices() {
  return {};
}
#endif

Device default_device() {
  return cuda_devices().empty() ? Device::cpu() : Device::cuda(0);
}

}  // namespace pagedattn
