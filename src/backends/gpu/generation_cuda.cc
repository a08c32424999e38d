// LaunchGenerations::for_layer: the layer's device capability decides (CUDA builds only).
#include <string>

#include "backends/gpu/generation.h"
#include "pagedattn/device_info.h"

namespace pagedattn::gpu {

StatusOr<kernels::KernelGeneration> LaunchGenerations::for_layer(
    std::string_view backend, const AttentionImplParams& params) {
  const auto str = [](int v) { return std::to_string(v); };
  const std::string name(backend);
  const CudaDeviceInfo* device = cuda_device(params.device.index);
  if (device == nullptr) {
    return invalid_argument(name + " impl: device cuda:" + str(params.device.index) +
                            " does not exist on this machine");
  }
  const int major = device->capability.major, minor = device->capability.minor;
  const int preferred = preferred_generation({major, minor}, params.head_size);
  if (preferred == 0) {
    return invalid_argument(name + " impl: no kernel generation serves head_size " +
                            str(params.head_size) + " on compute capability " + str(major) + "." +
                            str(minor) + " in this build (v2 needs sm_80+ and a built head size)");
  }
  const int chosen = params.kernel_generation != 0 ? params.kernel_generation : preferred;
  const auto generation = static_cast<kernels::KernelGeneration>(chosen);
  if ((chosen != 2 && chosen != 3) || !kernels::paged_attention_generation_built(generation) ||
      (chosen == 3 && major != 9)) {
    return invalid_argument(name + " impl: kernel_generation = " + str(chosen) +
                            " cannot run here (allowed: 0 = choose, 2, or 3 on compute capability "
                            "9.x in a build with sm_90a; this device is " +
                            str(major) + "." + str(minor) + ")");
  }
  return generation;
}

}  // namespace pagedattn::gpu
