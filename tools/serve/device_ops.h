// Where the serve loop's tensors live and how it moves and times work there: host memory and wall
// time for CPU backends; CUDA memory, one stream, CUDA events and CUDA graphs for GPU backends
// (device_ops_cuda.cc, built with CUDA only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "pagedattn/backend.h"
#include "pagedattn/status.h"

namespace pagedattn::serve {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual Device device() const = 0;
  virtual StreamHandle stream() const = 0;
  // Bytes that can still be allocated there (MemAvailable on the host, cudaMemGetInfo's free).
  virtual StatusOr<uint64_t> available_bytes() const = 0;
  // Zeroed memory owned by this object until it is destroyed.
  virtual StatusOr<void*> allocate(size_t bytes) = 0;
  virtual Status upload(void* dst, const void* host_src,
                        size_t bytes) = 0;                            // ordered on the stream
  virtual Status copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual Status download(void* host_dst, const void* src,
                          size_t bytes) = 0;  // waits for the stream
  virtual Status fill(void* dst, uint8_t byte, size_t bytes) = 0;
  virtual Status synchronize() = 0;
  // Milliseconds `work` takes where it runs (CUDA events on the stream; wall time on the host).
  virtual StatusOr<double> time(const std::function<Status()>& work) = 0;

  // CUDA graphs of whole steps, one per key (the padded batch size); the host has none.
  virtual bool supports_graphs() const { return false; }
  virtual bool has_graph(int key) const { return false; }
  virtual Status capture(int key, const std::function<Status()>& work) {
    return unimplemented("CUDA graphs need a CUDA device");
  }
  virtual Status replay(int key) { return unimplemented("CUDA graphs need a CUDA device"); }
};

std::unique_ptr<DeviceOps> make_host_ops();
// CUDA device `index`; Unimplemented in a build without CUDA.
StatusOr<std::unique_ptr<DeviceOps>> make_cuda_ops(int index);

}  // namespace pagedattn::serve
