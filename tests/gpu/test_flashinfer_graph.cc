// CUDA graphs ALWAYS for FLASHINFER: capture one forward of 256 decodes, let the builder rewrite
// its workspace for other steps of the same request and token counts (a mixed step: decodes, a
// prefill and padding requests; 256 decodes of other lengths), replay the one graph, and get the
// oracle's results. The engine's side is reproduced as in the FLASH_ATTN graph test: persistent
// buffers whose contents change between steps, and padded upper bounds for max_query_len and
// max_seq_len.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "cuda_test_support.h"
#include "runtime/device_buffer.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;
using testing::CaseSpec;

constexpr int kReqs = 256, kTokens = 256, kHq = 4, kHkv = 1, kD = 128;
constexpr int kMaxBlocksPerReq = 40;  // 640 keys of block 16
constexpr int kMaxSeqLen = 640;

CaseSpec step(const char* name, uint64_t seed, int decodes, int prefill) {
  CaseSpec s;
  s.name = name;
  s.seed = seed;
  s.num_heads = kHq;
  s.num_kv_heads = kHkv;
  s.head_size = kD;
  s.num_blocks = int64_t{kReqs} * kMaxBlocksPerReq;
  for (int r = 0; r < kReqs; ++r) {
    const bool decode = r < decodes, prefill_req = r == decodes && prefill > 0;
    s.query_lens.push_back(decode ? 1 : prefill_req ? prefill : 0);
    s.seq_lens.push_back(decode ? 1 + static_cast<int>((r * 2654435761u + seed) % 600)
                                : prefill_req ? prefill + 20 : 3);
  }
  return s;
}

struct Persistent {
  DeviceBuffer query, output, lse, qsl, seq_lens, block_table, cache;
  TensorView query_v, output_v, lse_v, qsl_v, seq_v, table_v, cache_v;
};

DeviceBuffer alloc(size_t bytes) {
  StatusOr<DeviceBuffer> r = DeviceBuffer::allocate(0, bytes);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : DeviceBuffer();
}

TEST(FlashInferGraph, CaptureAt256ReplaysMixedAndOtherLengths) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  std::vector<CaseSpec> specs = {step("graph_decodes", 1, 256, 0),
                                 step("graph_mixed", 2, 100, 156),
                                 step("graph_decodes_b", 3, 256, 0)};
  std::vector<testing::HostBatch> batches;
  for (const CaseSpec& s : specs) {
    StatusOr<testing::HostBatch> b = testing::make_host_batch(s, KVCacheLayout::kNHD);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    batches.push_back(std::move(b).value());
  }
  const AttentionBackend* backend = find_backend("FLASHINFER");
  auto impl = backend->make_impl(impl_params_for(batches[0]));
  BuilderParams bp = testing::builder_params_for(specs[0], KVCacheLayout::kNHD, Device::cuda(0));
  bp.max_num_reqs = kReqs;
  bp.max_num_tokens = kTokens;
  bp.max_model_len = kMaxSeqLen;
  auto builder = backend->make_builder(bp);
  ASSERT_TRUE(impl.ok() && builder.ok());
  ASSERT_EQ((*builder)->cudagraph_support(), AttentionCGSupport::kAlways);

  Persistent p;
  const Device gpu = Device::cuda(0);
  const TensorView& host_cache = batches[0].kv_cache.view();
  const int64_t cache_bytes = host_cache.nbytes();
  p.query = alloc(size_t(kTokens) * kHq * kD * 2);
  p.output = alloc(size_t(kTokens) * kHq * kD * 2);
  p.lse = alloc(size_t(kHq) * kTokens * 4);
  p.qsl = alloc(4 * (kReqs + 1));
  p.seq_lens = alloc(4 * kReqs);
  p.block_table = alloc(size_t(4) * kReqs * kMaxBlocksPerReq);
  p.cache = alloc(cache_bytes);
  p.query_v = TensorView(p.query.data(), DType::kBF16, gpu, {kTokens, kHq, kD});
  p.output_v = TensorView(p.output.data(), DType::kBF16, gpu, {kTokens, kHq, kD});
  p.lse_v = TensorView(p.lse.data(), DType::kF32, gpu, {kHq, kTokens});
  p.qsl_v = TensorView(p.qsl.data(), DType::kI32, gpu, {kReqs + 1});
  p.seq_v = TensorView(p.seq_lens.data(), DType::kI32, gpu, {kReqs});
  p.table_v = TensorView(p.block_table.data(), DType::kI32, gpu, {kReqs, kMaxBlocksPerReq});
  p.cache_v = TensorView(p.cache.data(), host_cache.dtype(), gpu, host_cache.shape(),
                         host_cache.strides());

  std::vector<std::unique_ptr<testing::DeviceBatch>> uploads;  // keeps the _cpu copies alive
  auto prepare = [&](const testing::HostBatch& batch) -> std::unique_ptr<AttentionMetadata> {
    StatusOr<std::unique_ptr<testing::DeviceBatch>> dev = testing::upload_batch(batch, 0);
    EXPECT_TRUE(dev.ok()) << dev.status().to_string();
    const testing::DeviceBatch& src = **dev;
    const CommonAttentionMetadata m = src.metadata();
    const auto d2d = cudaMemcpyDeviceToDevice;
    EXPECT_EQ(cudaMemcpy(p.query.data(), src.query().data(), src.query().nbytes(), d2d),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.cache.data(), src.kv_cache().data(), cache_bytes, d2d), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.qsl.data(), m.query_start_loc.data(), 4 * (kReqs + 1), d2d),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p.seq_lens.data(), m.seq_lens.data(), 4 * kReqs, d2d), cudaSuccess);
    const int64_t width = m.block_table_tensor.size(1);
    EXPECT_LE(width, kMaxBlocksPerReq);
    EXPECT_EQ(cudaMemset(p.block_table.data(), 0, p.block_table.bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy2D(p.block_table.data(), 4 * kMaxBlocksPerReq,
                           m.block_table_tensor.data(), 4 * width, 4 * width, kReqs, d2d),
              cudaSuccess);
    const Status w = (*impl)->do_kv_cache_update(src.key(), src.value(), p.cache_v,
                                                 m.slot_mapping, src.scales());
    EXPECT_TRUE(w.ok()) << w.to_string();
    CommonAttentionMetadata pm = m;
    pm.query_start_loc = p.qsl_v;
    pm.seq_lens = p.seq_v;
    pm.block_table_tensor = p.table_v;
    pm.max_query_len = kTokens;  // padded upper bounds, as for a captured step
    pm.max_seq_len = kMaxSeqLen;
    auto md = (*builder)->build_for_cudagraph_capture(pm);
    EXPECT_TRUE(md.ok()) << md.status().to_string();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    uploads.push_back(std::move(dev).value());
    return md.ok() ? std::move(md).value() : nullptr;
  };
  auto check = [&](const testing::HostBatch& batch, const char* what) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    testing::HostTensor out(DType::kBF16, {kTokens, kHq, kD}), lse(DType::kF32, {kHq, kTokens});
    EXPECT_EQ(cudaMemcpy(out.view().data(), p.output.data(), out.view().nbytes(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(lse.view().data(), p.lse.data(), lse.view().nbytes(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemset(p.output.data(), 0xFF, p.output.bytes()), cudaSuccess);  // re-poison
    EXPECT_EQ(cudaMemset(p.lse.data(), 0xFF, p.lse.bytes()), cudaSuccess);
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
                                       p.output_v, p.lse_v, KVScales{}, stream);
    EXPECT_TRUE(st.ok()) << st.to_string();
  };
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(p.output.data(), 0xFF, p.output.bytes()));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(p.lse.data(), 0xFF, p.lse.bytes()));
  std::unique_ptr<AttentionMetadata> md = prepare(batches[0]);
  ASSERT_NE(md, nullptr);
  forward(*md);
  check(batches[0], "256 decodes, eager");
  cudaGraph_t graph;
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  forward(*md);
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(exec, stream));
  check(batches[0], "256 decodes, graph");
  for (size_t i = 1; i < batches.size(); ++i) {
    std::unique_ptr<AttentionMetadata> next = prepare(batches[i]);
    ASSERT_NE(next, nullptr);
    PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(exec, stream));
    check(batches[i], specs[i].name.c_str());
  }
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphExecDestroy(exec));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphDestroy(graph));
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace pagedattn::test
