// Test support for decode context parallelism on one GPU: device copies of host buffers, N ranks
// on threads with a stream each over an in-process group, and one rank's share of a step
// (tests/unit/dcp_cpu_step.h cuts it on the host) placed on the device and run through a GPU
// backend as an engine would: build, cache write, forward.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/backend.h"
#include "pagedattn/communicator.h"
#include "reference/attention_ref.h"
#include "runtime/check.h"
#include "runtime/device_buffer.h"
#include "test_flash_attn_support.h"
#include "testing/host_batch.h"
#include "testing/step_runner.h"
#include "unit/dcp_cpu_step.h"
#include "unit/dcp_ranks.h"

namespace pagedattn::test {

struct DeviceTensor {
  runtime::DeviceBuffer buffer;
  TensorView view;
};

// A contiguous host view copied to cuda:0, same shape.
inline StatusOr<DeviceTensor> to_device(const TensorView& host) {
  if (!host.is_contiguous()) return invalid_argument("not contiguous: " + host.describe());
  DeviceTensor t;
  PAGEDATTN_ASSIGN_OR_RETURN(t.buffer, runtime::DeviceBuffer::allocate(0, host.nbytes()));
  t.view = TensorView(t.buffer.data(), host.dtype(), Device::cuda(0), host.shape());
  if (host.nbytes() > 0) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(t.buffer.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice),
        "uploading " + host.describe());
  }
  return t;
}

// `shape` of `dtype` on cuda:0, every byte 0xFF: NaN in f32, f16 and bf16.
inline StatusOr<DeviceTensor> poisoned(DType dtype, std::vector<int64_t> shape) {
  const TensorView shape_only(nullptr, dtype, Device::cuda(0), std::span<const int64_t>(shape));
  DeviceTensor t;
  PAGEDATTN_ASSIGN_OR_RETURN(t.buffer, runtime::DeviceBuffer::allocate(0, shape_only.nbytes()));
  t.view = TensorView(t.buffer.data(), dtype, Device::cuda(0), std::span<const int64_t>(shape));
  if (shape_only.nbytes() > 0) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(t.buffer.data(), 0xFF, shape_only.nbytes()),
                                   "poisoning a device buffer");
  }
  return t;
}

// A contiguous device view copied into a host tensor of its shape (after every stream's work).
inline StatusOr<testing::HostTensor> to_host(const TensorView& device) {
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "waiting for the device");
  testing::HostTensor host(device.dtype(),
                           std::vector<int64_t>(device.shape().begin(), device.shape().end()));
  if (device.nbytes() > 0) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(host.view().data(), device.data(), device.nbytes(), cudaMemcpyDeviceToHost),
        "downloading " + device.describe());
  }
  return host;
}

// Runs body(communicator, stream) for every rank on its own thread with its own stream, which it
// synchronises and destroys afterwards. The streams block with the legacy default stream, so the
// builders' uploads there are ordered with each rank's work.
inline std::vector<Status> run_on_rank_streams(
    std::vector<std::unique_ptr<Communicator>>& ranks,
    const std::function<Status(Communicator&, cudaStream_t)>& body) {
  return testing::run_on_ranks(ranks, [&](Communicator& comm) -> Status {
    cudaStream_t stream = nullptr;
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream), "creating a rank's stream");
    const Status ran = body(comm, stream);
    const Status synced = runtime::cuda_status(cudaStreamSynchronize(stream), "a rank's stream");
    cudaStreamDestroy(stream);
    return ran.ok() ? synced : ran;
  });
}

// What every rank reads alike: the batch's query (rank r views its heads), new tokens, scales and
// lengths.
struct DeviceStepInputs {
  DeviceTensor query, key, value, k_scale, v_scale, query_start_loc, seq_lens;
  KVScales scales() const { return {k_scale.view, v_scale.view}; }
};

inline StatusOr<DeviceStepInputs> upload_inputs(const testing::HostBatch& batch) {
  DeviceStepInputs in;
  PAGEDATTN_ASSIGN_OR_RETURN(in.query, to_device(batch.query.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.key, to_device(batch.key.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.value, to_device(batch.value.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.k_scale, to_device(batch.k_scale.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.v_scale, to_device(batch.v_scale.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.query_start_loc, to_device(batch.query_start_loc.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(in.seq_lens, to_device(batch.seq_lens.view()));
  return in;
}

// One rank's share of the step on cuda:0: its cache (bytes as the host cut them: NaN where
// unused, shuffled block ids), block table and slot mapping, its metadata with device tensors,
// its heads of the query, poisoned output and LSE, and the builder and impl parameters.
struct DeviceRankStep {
  KVCacheAllocation cache;
  DeviceTensor block_table, slot_mapping, output, lse;
  CommonAttentionMetadata meta;
  TensorView query;
  BuilderParams builder;
  AttentionImplParams impl;
};

inline StatusOr<DeviceRankStep> upload_rank_step(const testing::DcpRankStep& host,
                                                 const DeviceStepInputs& in, Communicator* group) {
  DeviceRankStep step;
  const TensorView& cache = host.cache.view();
  KVCacheShape shape{};
  for (int i = 0; i < 5; ++i) shape[i] = cache.size(i);
  PAGEDATTN_ASSIGN_OR_RETURN(
      step.cache,
      KVCacheAllocation::allocate(shape, cache.dtype(), host.cache.layout(), Device::cuda(0)));
  // One layout on both sides: the physical bytes copy as one block.
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(step.cache.view().data(), cache.data(), cache.nbytes(), cudaMemcpyHostToDevice),
      "uploading a rank's cache");
  PAGEDATTN_ASSIGN_OR_RETURN(step.block_table, to_device(host.block_table.view()));
  PAGEDATTN_ASSIGN_OR_RETURN(step.slot_mapping, to_device(host.slot_mapping.view()));
  const int64_t tokens = host.query.size(0), heads = host.query.size(1), dim = host.query.size(2);
  PAGEDATTN_ASSIGN_OR_RETURN(step.output, poisoned(host.query.dtype(), {tokens, heads, dim}));
  PAGEDATTN_ASSIGN_OR_RETURN(step.lse, poisoned(DType::kF32, {heads, tokens}));

  step.meta = host.meta;  // host lengths stay where they are; the device fields move
  step.meta.query_start_loc = in.query_start_loc.view;
  step.meta.seq_lens = in.seq_lens.view;
  step.meta.block_table_tensor = step.block_table.view;
  step.meta.slot_mapping = step.slot_mapping.view;
  step.meta.is_prefilling = TensorView();

  const TensorView& all = in.query.view;  // [T, N Hq, D]: this rank's heads at an offset
  const int64_t first_head = int64_t{host.rank} * heads;
  const int64_t q_shape[] = {tokens, heads, dim};
  const int64_t q_strides[] = {all.stride(0), all.stride(1), all.stride(2)};
  step.query = TensorView(static_cast<std::byte*>(all.data()) +
                              first_head * dim * static_cast<int64_t>(dtype_size(all.dtype())),
                          all.dtype(), all.device(), q_shape, q_strides);

  step.builder = host.builder;
  step.builder.device = Device::cuda(0);
  step.builder.max_num_reqs = std::max<int>(8, static_cast<int>(host.meta.num_reqs));
  step.builder.max_num_tokens = static_cast<int>(std::max<int64_t>(64, tokens));
  step.builder.max_model_len = 1 << 17;
  step.impl = host.impl;
  step.impl.device = Device::cuda(0);
  step.impl.dcp_group = group;
  return step;
}

// Every rank's step through `backend` on its own thread and stream: make the builder and impl,
// build, write the new tokens into its cache, forward.
inline std::vector<Status> run_gpu_ranks(const AttentionBackend& backend,
                                         std::vector<DeviceRankStep>& steps,
                                         const DeviceStepInputs& in,
                                         std::vector<std::unique_ptr<Communicator>>& group) {
  return run_on_rank_streams(group, [&](Communicator& comm, cudaStream_t stream) -> Status {
    DeviceRankStep& step = steps[comm.rank()];
    PAGEDATTN_ASSIGN_OR_RETURN(auto builder, backend.make_builder(step.builder));
    PAGEDATTN_ASSIGN_OR_RETURN(auto impl, backend.make_impl(step.impl));
    PAGEDATTN_ASSIGN_OR_RETURN(auto metadata, builder->build(0, step.meta));
    const KVCacheView cache(step.cache.view());
    PAGEDATTN_RETURN_IF_ERROR(impl->do_kv_cache_update(
        in.key.view, in.value.view, cache, step.slot_mapping.view, in.scales(), stream));
    return impl->forward(step.query, in.key.view, in.value.view, cache, *metadata, step.output.view,
                         step.lse.view, in.scales(), stream);
  });
}

// Heads [first, first + count) of a whole layer's out [T, H, D] and lse [H, T].
inline reference::ReferenceOutputs head_slice(const reference::ReferenceOutputs& whole,
                                              int64_t tokens, int64_t heads, int64_t dim,
                                              int64_t first, int64_t count) {
  reference::ReferenceOutputs slice;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = first; h < first + count; ++h) {
      for (int64_t d = 0; d < dim; ++d) slice.out.push_back(whole.out[(t * heads + h) * dim + d]);
    }
  }
  for (int64_t h = first; h < first + count; ++h) {
    for (int64_t t = 0; t < tokens; ++t) slice.lse.push_back(whole.lse[h * tokens + t]);
  }
  return slice;
}

// A host output [T, H, D] and LSE [H, T] as the oracle's float64 vectors.
inline reference::ReferenceOutputs as_reference(const TensorView& out, const TensorView& lse) {
  reference::ReferenceOutputs r;
  for (int64_t i = 0; i < out.numel(); ++i)
    r.out.push_back(load_as_float(out.data(), out.dtype(), i));
  for (int64_t i = 0; i < lse.numel(); ++i) r.lse.push_back(lse.data_as<const float>()[i]);
  return r;
}

// The layer at N = 1 on `backend` (cuda:0), through the step runner, as the oracle's vectors.
inline StatusOr<reference::ReferenceOutputs> one_rank(testing::HostBatch& batch,
                                                      const AttentionBackend& backend) {
  testing::StepOptions options;
  options.cascade = testing::CascadeMode::kNever;
  options.builder_params = builder_params_for(batch);
  PAGEDATTN_ASSIGN_OR_RETURN(
      auto run, testing::StepRunner::for_batch(batch, backend, Device::cuda(0), options));
  PAGEDATTN_RETURN_IF_ERROR(run->run_step());
  return as_reference(run->output().view(), run->lse().view());
}

}  // namespace pagedattn::test
