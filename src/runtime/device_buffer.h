// An owning, untyped cudaMalloc buffer on one device (persistent builder/impl buffers, test data).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "runtime/check.h"
#include "pagedattn/status.h"

namespace pagedattn::runtime {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      device_ = other.device_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  static StatusOr<DeviceBuffer> allocate(int device, size_t bytes) {
    DeviceBuffer buffer;
    buffer.device_ = device;
    if (bytes == 0) return buffer;
    ScopedDevice guard(device);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMalloc(&buffer.data_, bytes),
                                   "cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" +
                                       std::to_string(device));
    buffer.bytes_ = bytes;
    return buffer;
  }

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void release() {
    if (data_ == nullptr) return;
    ScopedDevice guard(device_);
    cudaFree(data_);  // a destructor cannot report; cudaFree fails only on a broken context
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

}  // namespace pagedattn::runtime
