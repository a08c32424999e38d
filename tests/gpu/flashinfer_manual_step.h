// Shared by the FLASHINFER first-prefill and cacheless GPU tests: small cases, and one step driven
// by hand (builder, impl, placed batch) so that forward can get an undefined cache, key/value of
// its choice, or run in a CUDA graph.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device_buffer.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {

// A case of 8/2 heads (GQA 4; tests ask for more where they need it: the float64 oracle runs on
// the host). query_lens empty: every request is a first prefill (query_len == seq_len).
inline testing::CaseSpec small_case(std::string name, uint64_t seed, std::vector<int> seq_lens,
                                    std::vector<int> query_lens = {}) {
  testing::CaseSpec s;
  s.name = std::move(name);
  s.seed = seed;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.query_lens = query_lens.empty() ? seq_lens : std::move(query_lens);
  s.seq_lens = std::move(seq_lens);
  return s;
}

// How a ManualStep is prepared: metadata for CUDA-graph capture or not.
struct ManualStepOptions {
  bool capture = false;
};

// What forward gets as its cache: the placed cache after the step's cache update, or none.
enum class StepCache { kUpdated, kNone };

// One case driven by hand on `device` (FLASHINFER on cuda:0, or CPU_ATTN on the host for
// parity): builder, impl and the placed batch; forward may get an undefined cache or key/value.
class ManualStep {
 public:
  ManualStep(const testing::CaseSpec& spec, AttentionType type, const std::string& backend_name,
             const Device& device, const ManualStepOptions& options = {})
      : spec_(spec) {
    const AttentionBackend* backend = find_backend(backend_name);
    StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
    EXPECT_TRUE(backend != nullptr && batch.ok()) << backend_name << ", " << spec.name;
    if (backend == nullptr || !batch.ok()) return;
    batch_ = std::make_unique<testing::HostBatch>(std::move(batch).value());
    expected_cache_ = host_cache_after_write(*batch_);
    out_ = testing::HostTensor(spec.dtype, {spec.num_tokens(), spec.num_heads, spec.head_size});
    lse_ = testing::HostTensor(DType::kF32, {spec.num_heads, spec.num_tokens()});
    if (device.is_cpu()) {
      placement_ = testing::place_on_host(*batch_, out_, lse_);
    } else if (auto on_gpu = testing::place_on_cuda(*batch_, device.index); on_gpu.ok()) {
      placement_ = std::move(on_gpu).value();
    }
    BuilderParams bp = testing::builder_params_for(spec, device);
    bp.max_model_len = 1 << 17;
    auto builder = backend->make_builder(bp);
    AttentionImplParams ip = batch_->params;
    ip.device = device;
    ip.attn_type = type;
    auto impl = backend->make_impl(ip);
    EXPECT_TRUE(placement_ != nullptr && builder.ok() && impl.ok()) << spec.name;
    if (placement_ == nullptr || !builder.ok() || !impl.ok()) return;
    const CommonAttentionMetadata& meta = placement_->operands().meta;
    auto md = options.capture ? (*builder)->build_for_cudagraph_capture(meta)
                              : (*builder)->build(0, meta);
    EXPECT_TRUE(md.ok()) << md.status().to_string();
    if (!md.ok()) return;
    builder_ = std::move(builder).value();
    impl_ = std::move(impl).value();
    md_ = std::move(md).value();
  }

  bool ready() const { return md_ != nullptr; }

  // Poisoned outputs, forward with `key`/`value` (undefined: none) and `cache`, download.
  Status run(StepCache cache, const TensorView& key, const TensorView& value) {
    PAGEDATTN_RETURN_IF_ERROR(prepare_forward(cache));
    PAGEDATTN_RETURN_IF_ERROR(forward(cache, key, value, nullptr));
    return finish();
  }
  // The step's own key/value, or none.
  Status run(StepCache cache, bool with_new_tokens) {
    if (!ready()) return internal_error("the step was not prepared");
    const testing::StepOperands& o = placement_->operands();
    return with_new_tokens ? run(cache, o.key, o.value) : run(cache, TensorView(), TensorView());
  }
  // The same forward captured in a CUDA graph on a stream of its own, then replayed; counts the
  // graph's kernel nodes (graph_kernel_nodes).
  Status run_in_graph(StepCache cache, const TensorView& key, const TensorView& value) {
    PAGEDATTN_RETURN_IF_ERROR(prepare_forward(cache));
    // The cache update ran on the default stream; the capture stream must not overtake it.
    PAGEDATTN_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Status st = cuda_status(cudaStreamCreate(&stream), "cudaStreamCreate");
    if (st.ok())
      st = cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
    if (st.ok()) {
      st = forward(cache, key, value, stream);
      const Status end = cuda_status(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
      if (st.ok()) st = end;
    }
    if (st.ok()) st = count_kernel_nodes(graph);
    if (st.ok()) st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (st.ok()) st = cuda_status(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    if (st.ok()) st = cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (stream != nullptr) cudaStreamDestroy(stream);
    PAGEDATTN_RETURN_IF_ERROR(st);
    return finish();
  }

  const testing::StepOperands& operands() const { return placement_->operands(); }
  int graph_kernel_nodes() const { return graph_kernel_nodes_; }

  // Key/value of the step's shape filled with NaN (owned by the step): a forward that reads them
  // for a request gives NaN there.
  StatusOr<TensorView> nan_new_tokens() {
    const TensorView& k = placement_->operands().key;
    const int64_t shape[] = {k.size(0), k.size(1), k.size(2)};
    const int64_t bytes =
        k.size(0) * k.size(1) * k.size(2) * static_cast<int64_t>(dtype_size(k.dtype()));
    if (nan_rows_.data() == nullptr) {
      PAGEDATTN_ASSIGN_OR_RETURN(nan_rows_,
                                 runtime::DeviceBuffer::allocate(k.device().index, bytes));
      PAGEDATTN_RETURN_IF_ERROR(
          cuda_status(cudaMemset(nan_rows_.data(), 0xFF, bytes), "cudaMemset"));  // NaN in f16/bf16
    }
    return TensorView(nan_rows_.data(), k.dtype(), k.device(), shape);
  }

  // A [T, Hkv, D] view 8 bytes into the query buffer (inside it: Hq > Hkv): key/value rows the
  // kernel cannot copy in 16-byte pieces.
  TensorView unaligned_new_tokens() const {
    const TensorView& q = placement_->operands().query;
    const int64_t shape[] = {q.size(0), spec_.num_kv_heads, spec_.head_size};
    const int64_t strides[] = {q.stride(0), spec_.head_size, 1};
    return TensorView(static_cast<char*>(q.data()) + 8, q.dtype(), q.device(), shape, strides);
  }

  reference::Comparison compare() const {
    const reference::ReferenceOutputs ref = oracle(*batch_, expected_cache_.view());
    return reference::compare_to_reference(out_.view(), lse_.view(), ref.out, ref.lse,
                                           reference::tolerance_for(spec_.dtype));
  }

  std::vector<uint8_t> output_bytes() const {
    const auto* bytes = static_cast<const uint8_t*>(out_.view().data());
    return {bytes, bytes + out_.view().nbytes()};
  }

 private:
  static Status cuda_status(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return ok_status();
    return internal_error(std::string(what) + ": " + cudaGetErrorString(err));
  }

  Status count_kernel_nodes(cudaGraph_t graph) {
    size_t n = 0;
    PAGEDATTN_RETURN_IF_ERROR(
        cuda_status(cudaGraphGetNodes(graph, nullptr, &n), "cudaGraphGetNodes"));
    std::vector<cudaGraphNode_t> nodes(n);
    PAGEDATTN_RETURN_IF_ERROR(
        cuda_status(cudaGraphGetNodes(graph, nodes.data(), &n), "cudaGraphGetNodes"));
    graph_kernel_nodes_ = 0;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      PAGEDATTN_RETURN_IF_ERROR(
          cuda_status(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType"));
      graph_kernel_nodes_ += type == cudaGraphNodeTypeKernel ? 1 : 0;
    }
    return ok_status();
  }

  // Poisoned outputs, then the step's cache update where `cache` asks for it.
  Status prepare_forward(StepCache cache) {
    if (!ready()) return internal_error("the step was not prepared");
    PAGEDATTN_RETURN_IF_ERROR(placement_->poison_outputs());
    if (cache != StepCache::kUpdated) return ok_status();
    const testing::StepOperands& o = placement_->operands();
    return impl_->do_kv_cache_update(o.key, o.value, o.kv_cache, o.meta.slot_mapping, o.scales);
  }

  Status forward(StepCache cache, const TensorView& key, const TensorView& value, void* stream) {
    const testing::StepOperands& o = placement_->operands();
    const TensorView& kv_cache = cache == StepCache::kNone ? TensorView() : o.kv_cache;
    return impl_->forward(o.query, key, value, kv_cache, *md_, o.output, o.lse, o.scales, stream);
  }

  Status finish() {
    PAGEDATTN_RETURN_IF_ERROR(placement_->synchronize());
    return placement_->download(*batch_, out_, lse_);
  }

  testing::CaseSpec spec_;
  std::unique_ptr<testing::HostBatch> batch_;
  KVCacheAllocation expected_cache_;
  testing::HostTensor out_, lse_;
  std::unique_ptr<testing::Placement> placement_;
  std::unique_ptr<AttentionMetadataBuilder> builder_;
  std::unique_ptr<AttentionImpl> impl_;
  std::unique_ptr<AttentionMetadata> md_;
  runtime::DeviceBuffer nan_rows_;
  int graph_kernel_nodes_ = -1;
};

}  // namespace pagedattn::test
