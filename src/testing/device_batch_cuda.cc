// upload_batch: a HostBatch copied to a CUDA device (same cache layout and bytes), plus output and
// LSE buffers poisoned with NaN (all-ones bytes are NaN in f32, f16 and bf16), and the way back.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "runtime/device_buffer.h"
#include "runtime/check.h"
#include "testing/device_batch.h"

namespace pagedattn::testing {
namespace {

using runtime::DeviceBuffer;

class CudaDeviceBatch final : public DeviceBatch {
 public:
  const TensorView& query() const override { return query_.view; }
  const TensorView& key() const override { return key_.view; }
  const TensorView& value() const override { return value_.view; }
  const TensorView& kv_cache() const override { return kv_cache_.view(); }
  KVScales scales() const override { return {k_scale_.view, v_scale_.view}; }
  CommonAttentionMetadata metadata() const override { return meta_; }
  const TensorView& output() const override { return output_.view; }
  const TensorView& output_lse() const override { return lse_.view; }

  Status download(HostTensor& output, HostTensor& lse, KVCacheAllocation& kv_cache) const override {
    runtime::ScopedDevice guard(device_);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "waiting for the device");
    output = HostTensor(output_.view.dtype(), shape_of(output_.view));
    lse = HostTensor(DType::kF32, shape_of(lse_.view));
    PAGEDATTN_RETURN_IF_ERROR(to_host(output.view().data(), output_.view));
    PAGEDATTN_RETURN_IF_ERROR(to_host(lse.view().data(), lse_.view));
    const TensorView& cache = kv_cache_.view();
    KVCacheShape shape{};
    for (int i = 0; i < 5; ++i) shape[i] = cache.size(i);
    PAGEDATTN_ASSIGN_OR_RETURN(kv_cache, KVCacheAllocation::allocate(shape, cache.dtype(),
                                                                     kv_cache_.layout(), Device::cpu()));
    return to_host(kv_cache.view().data(), cache);
  }

  Status init(const HostBatch& batch, int device) {
    device_ = device;
    runtime::ScopedDevice guard(device);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    for (const auto& [host, dst] :
         {std::pair{&batch.query, &query_}, std::pair{&batch.key, &key_},
          std::pair{&batch.value, &value_}, std::pair{&batch.k_scale, &k_scale_},
          std::pair{&batch.v_scale, &v_scale_}, std::pair{&batch.block_table, &block_table_},
          std::pair{&batch.seq_lens, &seq_lens_}, std::pair{&batch.query_start_loc, &query_start_loc_},
          std::pair{&batch.slot_mapping, &slot_mapping_}}) {
      PAGEDATTN_RETURN_IF_ERROR(copy_up(host->view(), *dst));
    }
    const TensorView& host_cache = batch.kv_cache.view();
    KVCacheShape shape{};
    for (int i = 0; i < 5; ++i) shape[i] = host_cache.size(i);
    PAGEDATTN_ASSIGN_OR_RETURN(kv_cache_, KVCacheAllocation::allocate(shape, host_cache.dtype(),
                                                                      batch.kv_cache.layout(),
                                                                      Device::cuda(device)));
    // Same layout, so the physical bytes copy as one block (NaN-filled unused pages included).
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemcpy(kv_cache_.view().data(), host_cache.data(),
                                              host_cache.nbytes(), cudaMemcpyHostToDevice),
                                   "uploading the KV cache");

    const CommonAttentionMetadata host_meta = batch.metadata();
    qsl_host_.assign(host_meta.query_start_loc_cpu.data_as<const int32_t>(),
                     host_meta.query_start_loc_cpu.data_as<const int32_t>() + host_meta.num_reqs + 1);
    seq_host_.assign(host_meta.seq_lens_cpu.data_as<const int32_t>(),
                     host_meta.seq_lens_cpu.data_as<const int32_t>() + host_meta.num_reqs);
    meta_ = host_meta;
    meta_.query_start_loc = query_start_loc_.view;
    meta_.query_start_loc_cpu = TensorView(qsl_host_.data(), DType::kI32, Device::cpu(),
                                           {static_cast<int64_t>(qsl_host_.size())});
    meta_.seq_lens = seq_lens_.view;
    meta_.seq_lens_cpu = TensorView(seq_host_.data(), DType::kI32, Device::cpu(),
                                    {static_cast<int64_t>(seq_host_.size())});
    meta_.block_table_tensor = block_table_.view;
    meta_.slot_mapping = slot_mapping_.view;
    meta_.is_prefilling = TensorView();

    const TensorView& q = batch.query.view();
    PAGEDATTN_RETURN_IF_ERROR(poisoned(q.dtype(), {q.size(0), q.size(1), q.size(2)}, output_));
    return poisoned(DType::kF32, {q.size(1), q.size(0)}, lse_);
  }

 private:
  struct Owned {
    DeviceBuffer buffer;
    TensorView view;
  };

  static std::vector<int64_t> shape_of(const TensorView& t) {
    return std::vector<int64_t>(t.shape().begin(), t.shape().end());
  }

  Status copy_up(const TensorView& host, Owned& dst) const {
    if (!host.is_contiguous()) return invalid_argument("host tensor not contiguous: " + host.describe());
    PAGEDATTN_ASSIGN_OR_RETURN(dst.buffer, DeviceBuffer::allocate(device_, host.nbytes()));
    dst.view = TensorView(dst.buffer.data(), host.dtype(), Device::cuda(device_), host.shape());
    if (host.nbytes() == 0) return ok_status();
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst.buffer.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice),
        "uploading " + host.describe());
    return ok_status();
  }

  Status poisoned(DType dtype, std::vector<int64_t> shape, Owned& dst) const {
    const TensorView shape_only(nullptr, dtype, Device::cuda(device_), std::span<const int64_t>(shape));
    PAGEDATTN_ASSIGN_OR_RETURN(dst.buffer, DeviceBuffer::allocate(device_, shape_only.nbytes()));
    dst.view = TensorView(dst.buffer.data(), dtype, Device::cuda(device_), std::span<const int64_t>(shape));
    if (shape_only.nbytes() == 0) return ok_status();
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(dst.buffer.data(), 0xFF, shape_only.nbytes()),
                                   "poisoning an output buffer");
    return ok_status();
  }

  Status to_host(void* dst, const TensorView& src) const {
    if (src.nbytes() == 0) return ok_status();
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src.data(), src.nbytes(), cudaMemcpyDeviceToHost),
                                   "downloading " + src.describe());
    return ok_status();
  }

  int device_ = 0;
  Owned query_, key_, value_, k_scale_, v_scale_, block_table_, seq_lens_, query_start_loc_,
      slot_mapping_, output_, lse_;
  KVCacheAllocation kv_cache_;
  std::vector<int32_t> qsl_host_, seq_host_;
  CommonAttentionMetadata meta_;
};

}  // namespace

StatusOr<std::unique_ptr<DeviceBatch>> upload_batch(const HostBatch& batch, int device_index) {
  auto device_batch = std::make_unique<CudaDeviceBatch>();
  PAGEDATTN_RETURN_IF_ERROR(device_batch->init(batch, device_index));
  return std::unique_ptr<DeviceBatch>(std::move(device_batch));
}

}  // namespace pagedattn::testing
