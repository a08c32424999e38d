#include "stream_gate.h"

#include <cstdint>

#include "runtime/check.h"

namespace pagedattn::test {
namespace {

constexpr uint64_t kTimeoutNs = 1'000'000'000;

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_until_open(volatile int* flags) {
  const uint64_t start = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - start > kTimeoutNs) {
      flags[1] = 1;
      return;
    }
  }
}

}  // namespace

StreamGate::StreamGate() {
  void* p = nullptr;
  if (cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped) == cudaSuccess) {
    flags_ = static_cast<volatile int*>(p);
  }
}

StreamGate::~StreamGate() {
  if (flags_ != nullptr) cudaFreeHost(const_cast<int*>(flags_));
}

Status StreamGate::close(cudaStream_t stream) {
  if (flags_ == nullptr) return internal_error("StreamGate: no host-mapped memory");
  flags_[0] = 0;
  flags_[1] = 0;
  void* device = nullptr;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device, const_cast<int*>(flags_), 0),
                                 "mapping the gate");
  hold_until_open<<<1, 1, 0, stream>>>(static_cast<volatile int*>(device));
  return runtime::cuda_status(cudaGetLastError(), "launching the gate");
}

void StreamGate::open() {
  flags_[0] = 1;
}

bool StreamGate::timed_out() const {
  return flags_[1] != 0;
}

}  // namespace pagedattn::test
