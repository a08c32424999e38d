// The engine's side of the CUDA-graph contract, for the GPU backends' graph tests: one set of
// persistent step buffers (query, output, LSE, query_start_loc, seq_lens, block table, cache) whose
// contents change between steps, metadata built for capture with padded max_query_len and
// max_seq_len, the checks of a step's results against the float64 oracle, and the captured graph.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "cuda_test_support.h"
#include "runtime/device_buffer.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {

class PersistentStep {
 public:
  // Buffers for `num_reqs` requests and `num_tokens` tokens of batches shaped like `like` (heads,
  // head size, dtype, cache geometry), block tables `max_blocks_per_req` wide.
  PersistentStep(const testing::HostBatch& like, int num_reqs, int num_tokens,
                 int max_blocks_per_req, int max_seq_len)
      : num_reqs_(num_reqs),
        num_tokens_(num_tokens),
        max_blocks_(max_blocks_per_req),
        max_seq_len_(max_seq_len),
        hq_(like.spec.num_heads),
        d_(like.spec.head_size),
        dtype_(like.spec.dtype) {
    const Device gpu = Device::cuda(0);
    const TensorView& cache = like.kv_cache.view();
    const size_t esize = dtype_size(dtype_);
    query_ = alloc(size_t(num_tokens) * hq_ * d_ * esize);
    output_ = alloc(size_t(num_tokens) * hq_ * d_ * esize);
    lse_ = alloc(size_t(hq_) * num_tokens * 4);
    qsl_ = alloc(4 * (num_reqs + 1));
    seq_lens_ = alloc(4 * num_reqs);
    block_table_ = alloc(size_t(4) * num_reqs * max_blocks_per_req);
    cache_ = alloc(cache.nbytes());
    query_v_ = TensorView(query_.data(), dtype_, gpu, {num_tokens, hq_, d_});
    output_v_ = TensorView(output_.data(), dtype_, gpu, {num_tokens, hq_, d_});
    lse_v_ = TensorView(lse_.data(), DType::kF32, gpu, {hq_, num_tokens});
    qsl_v_ = TensorView(qsl_.data(), DType::kI32, gpu, {num_reqs + 1});
    seq_v_ = TensorView(seq_lens_.data(), DType::kI32, gpu, {num_reqs});
    table_v_ = TensorView(block_table_.data(), DType::kI32, gpu, {num_reqs, max_blocks_per_req});
    cache_v_ = TensorView(cache_.data(), cache.dtype(), gpu, cache.shape(), cache.strides());
    poison();
  }

  // Copies a step into the buffers (the cache write through `impl` included) and builds its
  // metadata for capture.
  std::unique_ptr<AttentionMetadata> prepare(const testing::HostBatch& batch, AttentionImpl& impl,
                                             AttentionMetadataBuilder& builder) {
    StatusOr<std::unique_ptr<testing::DeviceBatch>> dev = testing::upload_batch(batch, 0);
    EXPECT_TRUE(dev.ok()) << dev.status().to_string();
    if (!dev.ok()) return nullptr;
    const testing::DeviceBatch& src = **dev;
    const CommonAttentionMetadata m = src.metadata();
    const auto d2d = cudaMemcpyDeviceToDevice;
    EXPECT_EQ(src.kv_cache().nbytes(), cache_v_.nbytes()) << "every step has the same cache";
    cuda_ok(
        cudaMemcpy(query_.data(), src.query().data(), src.query().nbytes(), d2d));
    cuda_ok(
        cudaMemcpy(cache_.data(), src.kv_cache().data(), cache_v_.nbytes(), d2d));
    cuda_ok(
        cudaMemcpy(qsl_.data(), m.query_start_loc.data(), 4 * (num_reqs_ + 1), d2d));
    cuda_ok(cudaMemcpy(seq_lens_.data(), m.seq_lens.data(), 4 * num_reqs_, d2d));
    const int64_t width = m.block_table_tensor.size(1);
    EXPECT_LE(width, max_blocks_);
    cuda_ok(cudaMemset(block_table_.data(), 0, block_table_.bytes()));
    cuda_ok(cudaMemcpy2D(block_table_.data(), 4 * max_blocks_,
                                          m.block_table_tensor.data(), 4 * width, 4 * width,
                                          num_reqs_, d2d));
    const Status w =
        impl.do_kv_cache_update(src.key(), src.value(), cache_v_, m.slot_mapping, src.scales());
    EXPECT_TRUE(w.ok()) << w.to_string();
    CommonAttentionMetadata pm = m;
    pm.query_start_loc = qsl_v_;
    pm.seq_lens = seq_v_;
    pm.block_table_tensor = table_v_;
    pm.max_query_len = num_tokens_;  // padded upper bounds, as for a captured step
    pm.max_seq_len = max_seq_len_;
    StatusOr<std::unique_ptr<AttentionMetadata>> md = builder.build_for_cudagraph_capture(pm);
    EXPECT_TRUE(md.ok()) << md.status().to_string();
    cuda_ok(cudaDeviceSynchronize());
    uploads_.push_back(std::move(dev).value());  // keeps the step's _cpu copies alive
    return md.ok() ? std::move(md).value() : nullptr;
  }

  void forward(AttentionImpl& impl, const AttentionMetadata& md, cudaStream_t stream) {
    const Status st = impl.forward(query_v_, TensorView(), TensorView(), cache_v_, md, output_v_,
                                   lse_v_, KVScales{}, stream);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }

  // Output and LSE downloaded, then poisoned again.
  void download(testing::HostTensor& out, testing::HostTensor& lse) {
    cuda_ok(cudaDeviceSynchronize());
    out = testing::HostTensor(dtype_, {num_tokens_, hq_, d_});
    lse = testing::HostTensor(DType::kF32, {hq_, num_tokens_});
    cuda_ok(cudaMemcpy(out.view().data(), output_.data(), out.view().nbytes(),
                                        cudaMemcpyDeviceToHost));
    cuda_ok(cudaMemcpy(lse.view().data(), lse_.data(), lse.view().nbytes(),
                                        cudaMemcpyDeviceToHost));
    poison();
  }

  void poison() {
    cuda_ok(cudaMemset(output_.data(), 0xFF, output_.bytes()));
    cuda_ok(cudaMemset(lse_.data(), 0xFF, lse_.bytes()));
  }

  // The oracle over the batch's cache with its new tokens written on the host.
  static void expect_oracle(const testing::HostBatch& batch, const testing::HostTensor& out,
                            const testing::HostTensor& lse, const char* what) {
    const KVCacheAllocation cache = host_cache_after_write(batch);
    const reference::ReferenceOutputs ref = oracle(batch, cache.view());
    const reference::Comparison c = reference::compare_to_reference(
        out.view(), lse.view(), ref.out, ref.lse, reference::tolerance_for(batch.spec.dtype));
    EXPECT_TRUE(c.pass) << what << ": max abs " << c.max_abs_error << "\n" << c.detail;
  }

 private:
  static void cuda_ok(cudaError_t err) {
    EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  }
  static runtime::DeviceBuffer alloc(size_t bytes) {
    StatusOr<runtime::DeviceBuffer> r = runtime::DeviceBuffer::allocate(0, bytes);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : runtime::DeviceBuffer();
  }

  int num_reqs_, num_tokens_, max_blocks_, max_seq_len_, hq_, d_;
  DType dtype_;
  runtime::DeviceBuffer query_, output_, lse_, qsl_, seq_lens_, block_table_, cache_;
  TensorView query_v_, output_v_, lse_v_, qsl_v_, seq_v_, table_v_, cache_v_;
  std::vector<std::unique_ptr<testing::DeviceBatch>> uploads_;
};

// The work one call of `record` enqueues on a stream, captured and instantiated; destroyed with
// this object.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_ != nullptr) {
      EXPECT_EQ(cudaGraphExecDestroy(exec_), cudaSuccess);
    }
    if (graph_ != nullptr) {
      EXPECT_EQ(cudaGraphDestroy(graph_), cudaSuccess);
    }
  }

  // Call under ASSERT_NO_FATAL_FAILURE: a failed CUDA call ends only this function.
  void capture(cudaStream_t stream, const std::function<void()>& record) {
    PAGEDATTN_EXPECT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    record();
    PAGEDATTN_EXPECT_CUDA_OK(cudaStreamEndCapture(stream, &graph_));
    PAGEDATTN_EXPECT_CUDA_OK(cudaGraphInstantiate(&exec_, graph_, 0));
  }

  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace pagedattn::test
