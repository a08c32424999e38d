// Device scratch for one call of the device combine: one stream-ordered allocation
// (cudaMallocAsync) cut into parts, freed on `stream` (cudaFreeAsync) when the call returns, so
// that the memory is reused only by work ordered after everything the call enqueued. Needs the
// CUDA runtime (include from *_cuda.cc files).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/check.h"

namespace pagedattn::dcp {

class StreamScratch {
 public:
  // Parts of the given byte sizes, each 256-byte aligned.
  static StatusOr<StreamScratch> allocate(std::initializer_list<size_t> part_bytes,
                                          cudaStream_t stream) {
    StreamScratch scratch;
    scratch.stream_ = stream;
    size_t total = 0;
    for (size_t bytes : part_bytes) {
      scratch.offsets_.push_back(total);
      total += (bytes + kAlign - 1) / kAlign * kAlign;
    }
    if (total == 0) return scratch;  // an empty step: nothing to hold
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMallocAsync(&scratch.base_, total, stream),
        "cudaMallocAsync of " + std::to_string(total) + " bytes of DCP combine scratch");
    return scratch;
  }
  StreamScratch(StreamScratch&& other) noexcept
      : base_(other.base_), stream_(other.stream_), offsets_(std::move(other.offsets_)) {
    other.base_ = nullptr;
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  StreamScratch& operator=(StreamScratch&&) = delete;
  ~StreamScratch() {
    if (base_ != nullptr) cudaFreeAsync(base_, stream_);  // fails only on a broken context
  }

  template <typename T>
  T* part(size_t index) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offsets_[index]);
  }

 private:
  static constexpr size_t kAlign = 256;
  StreamScratch() = default;

  void* base_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<size_t> offsets_;
};

}  // namespace pagedattn::dcp
