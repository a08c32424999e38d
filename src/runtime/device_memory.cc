// Builds without CUDA: device allocations report Unimplemented (device_memory_cuda.cc otherwise).
#include "pagedattn/config.h"

#if !PAGEDATTN_WITH_CUDA
#include <string>

#include "runtime/device_memory.h"

namespace pagedattn::runtime {

Status device_malloc(int device_index, size_t bytes, void** out) {
  (void)bytes;
  *out = nullptr;
  return unimplemented("cannot allocate on cuda:" + std::to_string(device_index) +
                       ": this build has no CUDA support");
}

void device_free(int, void*) {}

}  // namespace pagedattn::runtime
#endif
