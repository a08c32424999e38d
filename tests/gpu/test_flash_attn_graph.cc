// CUDA-graph safety: capture one forward into a graph, then let the builder rewrite its metadata for
// a batch with other lengths and another prefill/decode mix of the same token and request counts,
// replay, and get the eager results (and the oracle's). The engine's side of the contract is
// reproduced here: every tensor the captured launch reads lives in persistent buffers whose
// contents change between steps, and max_query_len / max_seq_len are the padded upper bounds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/device_buffer.h"
#include "cuda_test_support.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;
using testing::CaseSpec;

constexpr int kMaxBlocksPerReq = 320;  // 5120 keys of block 16
constexpr int kMaxSeqLen = 5120;

// The persistent step buffers a serving engine keeps (one set for every step it replays).
struct StepBuffers {
  DeviceBuffer query, output, lse, qsl, seq_lens, block_table, cache;
  TensorView query_v, output_v, lse_v, qsl_v, seq_v, table_v, cache_v;
};

void expect_same(const testing::HostTensor& a, const testing::HostTensor& b, double tol,
                 const char* what) {
  const TensorView& va = a.view();
  ASSERT_EQ(va.numel(), b.view().numel());
  double worst = 0.0;
  int64_t nan = 0;
  for (int64_t i = 0; i < va.numel(); ++i) {
    const double x = load_as_float(va.data(), va.dtype(), i);
    const double y = load_as_float(b.view().data(), b.view().dtype(), i);
    if (std::isinf(x) && x == y) continue;
    const double diff = std::fabs(x - y);
    if (std::isnan(diff)) ++nan;
    else worst = std::max(worst, diff);
  }
  EXPECT_EQ(nan, 0) << what << ": NaN or unmatched infinities";
  EXPECT_LE(worst, tol) << what << ": graph replay vs eager, max abs difference " << worst;
}

CaseSpec step(std::string name, std::vector<int> seqs, std::vector<int> qs) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = 77;
  s.seq_lens = std::move(seqs);
  s.query_lens = std::move(qs);
  s.num_blocks = 6 * kMaxBlocksPerReq;  // the same cache geometry for both steps
  return s;
}

TEST(FlashAttnGraph, ReplayAfterRebuildMatchesEager) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  // Same request count (5) and token count (64); different lengths and mix. Step A: four decodes
  // (two long enough to split) and a 60-token prefill; step B: a chunked prefill, a 4096-key
  // decode, a 40-token prefill, speculative verification of 2, one decode.
  const CaseSpec a_spec = step("graph_a", {500, 3000, 17, 1, 200}, {1, 1, 1, 1, 60});
  const CaseSpec b_spec = step("graph_b", {20, 4096, 100, 900, 33}, {20, 1, 40, 2, 1});
  StatusOr<testing::HostBatch> a = testing::make_host_batch(a_spec, KVCacheLayout::kNHD);
  StatusOr<testing::HostBatch> b = testing::make_host_batch(b_spec, KVCacheLayout::kNHD);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  const int num_reqs = 5, num_tokens = 64, hq = 32, d = 128;

  const AttentionBackend* backend = find_backend("FLASH_ATTN");
  StatusOr<std::unique_ptr<AttentionImpl>> impl = backend->make_impl(impl_params_for(*a));
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> builder =
      backend->make_builder(builder_params_for(*a));
  ASSERT_TRUE(impl.ok() && builder.ok());
  ASSERT_EQ((*builder)->cudagraph_support(), AttentionCGSupport::kAlways);

  StepBuffers p;
  const Device gpu = Device::cuda(0);
  const int64_t cache_bytes = a->kv_cache.view().nbytes();
  ASSERT_EQ(cache_bytes, b->kv_cache.view().nbytes());
  auto alloc = [](DeviceBuffer& buf, size_t bytes) {
    StatusOr<DeviceBuffer> r = DeviceBuffer::allocate(0, bytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    buf = std::move(r).value();
  };
  alloc(p.query, size_t(num_tokens) * hq * d * 2);
  alloc(p.output, size_t(num_tokens) * hq * d * 2);
  alloc(p.lse, size_t(hq) * num_tokens * 4);
  alloc(p.qsl, 4 * (num_reqs + 1));
  alloc(p.seq_lens, 4 * num_reqs);
  alloc(p.block_table, size_t(4) * num_reqs * kMaxBlocksPerReq);
  alloc(p.cache, cache_bytes);
  p.query_v = TensorView(p.query.data(), DType::kBF16, gpu, {num_tokens, hq, d});
  p.output_v = TensorView(p.output.data(), DType::kBF16, gpu, {num_tokens, hq, d});
  p.lse_v = TensorView(p.lse.data(), DType::kF32, gpu, {hq, num_tokens});
  p.qsl_v = TensorView(p.qsl.data(), DType::kI32, gpu, {num_reqs + 1});
  p.seq_v = TensorView(p.seq_lens.data(), DType::kI32, gpu, {num_reqs});
  p.table_v = TensorView(p.block_table.data(), DType::kI32, gpu, {num_reqs, kMaxBlocksPerReq});
  const TensorView& host_cache = a->kv_cache.view();
  p.cache_v = TensorView(p.cache.data(), host_cache.dtype(), gpu, host_cache.shape(), host_cache.strides());

  std::vector<std::unique_ptr<testing::DeviceBatch>> uploads;  // keeps each step's _cpu copies alive
  // Copies a step into the persistent buffers (cache write included) and builds its metadata.
  auto prepare = [&](const testing::HostBatch& batch) -> std::unique_ptr<AttentionMetadata> {
    StatusOr<std::unique_ptr<testing::DeviceBatch>> dev = testing::upload_batch(batch, 0);
    EXPECT_TRUE(dev.ok()) << dev.status().to_string();
    const testing::DeviceBatch& src = **dev;
    const CommonAttentionMetadata m = src.metadata();
    EXPECT_EQ(cudaMemcpy(p.query.data(), src.query().data(), src.query().nbytes(), cudaMemcpyDeviceToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.cache.data(), src.kv_cache().data(), cache_bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.qsl.data(), m.query_start_loc.data(), 4 * (num_reqs + 1), cudaMemcpyDeviceToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.seq_lens.data(), m.seq_lens.data(), 4 * num_reqs, cudaMemcpyDeviceToDevice), cudaSuccess);
    const int64_t width = m.block_table_tensor.size(1);
    EXPECT_LE(width, kMaxBlocksPerReq);
    EXPECT_EQ(cudaMemset(p.block_table.data(), 0, size_t(4) * num_reqs * kMaxBlocksPerReq), cudaSuccess);
    EXPECT_EQ(cudaMemcpy2D(p.block_table.data(), 4 * kMaxBlocksPerReq, m.block_table_tensor.data(),
                           4 * width, 4 * width, num_reqs, cudaMemcpyDeviceToDevice), cudaSuccess);
    const Status w = (*impl)->do_kv_cache_update(src.key(), src.value(), p.cache_v, m.slot_mapping,
                                                 src.scales());
    EXPECT_TRUE(w.ok()) << w.to_string();
    CommonAttentionMetadata pm = m;
    pm.query_start_loc = p.qsl_v;
    pm.seq_lens = p.seq_v;
    pm.block_table_tensor = p.table_v;
    pm.max_query_len = num_tokens;  // padded upper bounds, as for a captured step
    pm.max_seq_len = kMaxSeqLen;
    StatusOr<std::unique_ptr<AttentionMetadata>> md = (*builder)->build_for_cudagraph_capture(pm);
    EXPECT_TRUE(md.ok()) << md.status().to_string();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    uploads.push_back(std::move(dev).value());
    return md.ok() ? std::move(md).value() : nullptr;
  };
  const KVScales scales = {};  // bf16 cache: no scales
  auto download = [&](testing::HostTensor& out, testing::HostTensor& lse) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    out = testing::HostTensor(DType::kBF16, {num_tokens, hq, d});
    lse = testing::HostTensor(DType::kF32, {hq, num_tokens});
    EXPECT_EQ(cudaMemcpy(out.view().data(), p.output.data(), out.view().nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(lse.view().data(), p.lse.data(), lse.view().nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemset(p.output.data(), 0xFF, out.view().nbytes()), cudaSuccess);  // re-poison
    EXPECT_EQ(cudaMemset(p.lse.data(), 0xFF, lse.view().nbytes()), cudaSuccess);
  };
  auto oracle_check = [&](const testing::HostBatch& batch, const testing::HostTensor& out,
                          const testing::HostTensor& lse, const char* what) {
    const KVCacheAllocation cache = host_cache_after_write(batch);
    const reference::ReferenceOutputs ref = oracle(batch, cache.view());
    const reference::Comparison c = reference::compare_to_reference(
        out.view(), lse.view(), ref.out, ref.lse, reference::tolerance_for(DType::kBF16));
    EXPECT_TRUE(c.pass) << what << ": max abs " << c.max_abs_error << "\n" << c.detail;
  };

  cudaStream_t stream;
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamCreate(&stream));
  auto forward = [&](const AttentionMetadata& md) {
    const Status st = (*impl)->forward(p.query_v, TensorView(), TensorView(), p.cache_v, md,
                                       p.output_v, p.lse_v, scales, stream);
    EXPECT_TRUE(st.ok()) << st.to_string();
  };

  // Step A: eager, then captured and replayed.
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(p.output.data(), 0xFF, p.output.bytes()));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(p.lse.data(), 0xFF, p.lse.bytes()));
  std::unique_ptr<AttentionMetadata> md_a = prepare(*a);
  ASSERT_NE(md_a, nullptr);
  forward(*md_a);
  testing::HostTensor eager_a, eager_a_lse, graph_a, graph_a_lse;
  download(eager_a, eager_a_lse);
  cudaGraph_t graph;
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  forward(*md_a);
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(exec, stream));
  download(graph_a, graph_a_lse);
  oracle_check(*a, eager_a, eager_a_lse, "step A eager");
  oracle_check(*a, graph_a, graph_a_lse, "step A graph");
  expect_same(eager_a, graph_a, 1e-2, "step A output");
  expect_same(eager_a_lse, graph_a_lse, 1e-4, "step A lse");

  // Step B: the builder rewrites its buffers; the same graph replays the new step.
  std::unique_ptr<AttentionMetadata> md_b = prepare(*b);
  ASSERT_NE(md_b, nullptr);
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(exec, stream));
  testing::HostTensor graph_b, graph_b_lse, eager_b, eager_b_lse;
  download(graph_b, graph_b_lse);
  forward(*md_b);
  download(eager_b, eager_b_lse);
  oracle_check(*b, eager_b, eager_b_lse, "step B eager");
  oracle_check(*b, graph_b, graph_b_lse, "step B graph");
  expect_same(eager_b, graph_b, 1e-2, "step B output");
  expect_same(eager_b_lse, graph_b_lse, 1e-4, "step B lse");

  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphExecDestroy(exec));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphDestroy(graph));
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace pagedattn::test
