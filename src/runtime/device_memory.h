// Raw CUDA device memory for owning allocations (KVCacheAllocation). Implemented in
// device_memory_cuda.cc in CUDA builds; without CUDA every call reports Unimplemented.
#pragma once

#include <cstddef>

#include "pagedattn/status.h"

namespace pagedattn::runtime {

Status device_malloc(int device_index, size_t bytes, void** out);
void device_free(int device_index, void* memory);

}  // namespace pagedattn::runtime
