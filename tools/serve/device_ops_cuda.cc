// CUDA DeviceOps: one blocking stream (the legacy default stream, which FLASH_ATTN's builder copies
// on, orders with it), CUDA events for timing, one captured graph per padded batch size.
#include <cuda_runtime.h>

#include <map>
#include <vector>

#include "runtime/check.h"
#include "serve/device_ops.h"

namespace pagedattn::serve {
namespace {

class CudaOps final : public DeviceOps {
 public:
  explicit CudaOps(int index) : index_(index) {}
  ~CudaOps() override {
    runtime::ScopedDevice guard(index_);
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (void* p : owned_) cudaFree(p);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream_), "cudaStreamCreate");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_), "cudaEventCreate");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_), "cudaEventCreate");
    return ok_status();
  }

  Device device() const override { return Device::cuda(index_); }
  StreamHandle stream() const override { return stream_; }

  StatusOr<uint64_t> available_bytes() const override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    size_t free = 0, total = 0;
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return uint64_t{free};
  }
  StatusOr<void*> allocate(size_t bytes) override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    void* p = nullptr;
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes == 0 ? 256 : bytes),
                                   "cudaMalloc(" + std::to_string(bytes) + ")");
    owned_.push_back(p);
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(p, 0, bytes), "cudaMemset");
    return p;
  }
  Status upload(void* dst, const void* src, size_t bytes) override {
    return async_copy(dst, src, bytes, cudaMemcpyHostToDevice, "uploading step data");
  }
  Status copy(void* dst, const void* src, size_t bytes) override {
    return async_copy(dst, src, bytes, cudaMemcpyDeviceToDevice, "copying on the device");
  }
  Status download(void* dst, const void* src, size_t bytes) override {
    PAGEDATTN_RETURN_IF_ERROR(async_copy(dst, src, bytes, cudaMemcpyDeviceToHost, "downloading"));
    return synchronize();
  }
  Status fill(void* dst, uint8_t byte, size_t bytes) override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, byte, bytes, stream_), "cudaMemsetAsync");
    return ok_status();
  }
  Status synchronize() override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "waiting for the device");
    return ok_status();
  }
  StatusOr<double> time(const std::function<Status()>& work) override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream_), "cudaEventRecord");
    PAGEDATTN_RETURN_IF_ERROR(work());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0.0f;
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_),
                                   "cudaEventElapsedTime");
    return static_cast<double>(ms);
  }

  bool supports_graphs() const override { return true; }
  bool has_graph(int key) const override { return graphs_.count(key) > 0; }
  Status capture(int key, const std::function<Status()>& work) override {
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
    const Status captured = work();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    PAGEDATTN_RETURN_IF_ERROR(captured);
    PAGEDATTN_CUDA_RETURN_IF_ERROR(ended, "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    PAGEDATTN_CUDA_RETURN_IF_ERROR(made, "cudaGraphInstantiate");
    graphs_[key] = exec;
    return ok_status();
  }
  Status replay(int key) override {
    auto it = graphs_.find(key);
    if (it == graphs_.end())
      return internal_error("no CUDA graph for batch size " + std::to_string(key));
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
    return ok_status();
  }

 private:
  Status async_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                    const char* what) {
    if (bytes == 0) return ok_status();
    runtime::ScopedDevice guard(index_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_), what);
    return ok_status();
  }

  int index_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<void*> owned_;
  std::map<int, cudaGraphExec_t> graphs_;
};

}  // namespace

StatusOr<std::unique_ptr<DeviceOps>> make_cuda_ops(int index) {
  auto ops = std::make_unique<CudaOps>(index);
  PAGEDATTN_RETURN_IF_ERROR(ops->init());
  return std::unique_ptr<DeviceOps>(std::move(ops));
}

}  // namespace pagedattn::serve
