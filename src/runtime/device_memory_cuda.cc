// cudaMalloc / cudaFree on a given device, restoring the caller's current device.
#include <cuda_runtime.h>

#include <string>

#include "runtime/device_memory.h"
#include "runtime/check.h"

namespace pagedattn::runtime {
Status device_malloc(int device_index, size_t bytes, void** out) {
  *out = nullptr;
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return cuda_status(err, "cudaGetDevice");
  err = cudaSetDevice(device_index);
  if (err != cudaSuccess) {
    return cuda_status(err, "cudaSetDevice(" + std::to_string(device_index) + ")");
  }
  err = cudaMalloc(out, bytes);
  cudaSetDevice(previous);
  if (err != cudaSuccess) {
    *out = nullptr;
    return cuda_status(err, "cudaMalloc of " + std::to_string(bytes) +
                                " bytes on cuda:" + std::to_string(device_index));
  }
  return ok_status();
}

void device_free(int device_index, void* memory) {
  if (memory == nullptr) return;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  cudaSetDevice(device_index);
  cudaFree(memory);  // errors here cannot be reported from a destructor
  cudaSetDevice(previous);
}

}  // namespace pagedattn::runtime
