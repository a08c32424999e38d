// A case on a CUDA device: the batch uploaded by upload_batch, outputs poisoned before
// each run, timing by CUDA events on the stream the backend runs on (the default stream).
#include <cuda_runtime.h>

#include "runtime/check.h"
#include "testing/device_batch.h"
#include "testing/step_runner.h"

namespace pagedattn::testing {
namespace {

class CudaPlacement final : public Placement {
 public:
  CudaPlacement(std::unique_ptr<DeviceBatch> batch, int device)
      : batch_(std::move(batch)), device_(device) {
    ops_.query = batch_->query();
    ops_.key = batch_->key();
    ops_.value = batch_->value();
    ops_.kv_cache = batch_->kv_cache();
    ops_.output = batch_->output();
    ops_.lse = batch_->output_lse();
    ops_.scales = batch_->scales();
    ops_.meta = batch_->metadata();
  }
  const StepOperands& operands() const override { return ops_; }

  Status poison_outputs() override {
    runtime::ScopedDevice guard(device_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    // All-ones bytes are NaN in f32, f16 and bf16.
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(ops_.output.data(), 0xFF, ops_.output.nbytes()),
                                   "poisoning the output");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(ops_.lse.data(), 0xFF, ops_.lse.nbytes()),
                                   "poisoning the LSE");
    return ok_status();
  }

  Status synchronize() override {
    runtime::ScopedDevice guard(device_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "waiting for the device");
    return ok_status();
  }

  Status download(HostBatch& batch, HostTensor& output, HostTensor& lse) override {
    return batch_->download(output, lse, batch.kv_cache);
  }

  StatusOr<std::vector<double>> time_ms(const std::function<Status()>& fn, int warmup,
                                        int repeats) override {
    runtime::ScopedDevice guard(device_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    for (int i = 0; i < warmup; ++i) PAGEDATTN_RETURN_IF_ERROR(fn());
    std::vector<cudaEvent_t> events(2 * static_cast<size_t>(repeats));
    for (cudaEvent_t& e : events) {
      PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e), "cudaEventCreate");
    }
    Status status = ok_status();
    for (int i = 0; i < repeats && status.ok(); ++i) {
      status = runtime::cuda_status(cudaEventRecord(events[2 * i]), "cudaEventRecord");
      if (status.ok()) status = fn();
      if (status.ok())
        status = runtime::cuda_status(cudaEventRecord(events[2 * i + 1]), "cudaEventRecord");
    }
    if (status.ok())
      status = runtime::cuda_status(cudaDeviceSynchronize(), "waiting for the device");
    std::vector<double> times;
    for (int i = 0; i < repeats && status.ok(); ++i) {
      float ms = 0.0f;
      status = runtime::cuda_status(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]),
                                    "cudaEventElapsedTime");
      times.push_back(ms);
    }
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (!status.ok()) return status;
    return times;
  }

 private:
  std::unique_ptr<DeviceBatch> batch_;
  int device_;
  StepOperands ops_;
};

}  // namespace

StatusOr<std::unique_ptr<Placement>> place_on_cuda(const HostBatch& batch, int device_index) {
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBatch> device_batch,
                             upload_batch(batch, device_index));
  return std::unique_ptr<Placement>(
      std::make_unique<CudaPlacement>(std::move(device_batch), device_index));
}

}  // namespace pagedattn::testing
