// CUDA graphs ALWAYS for FLASHINFER: capture one forward of 256 decodes, let the builder rewrite
// its workspace for other steps of the same request and token counts (a mixed step: decodes, a
// prefill and padding requests; 256 decodes of other lengths), replay the one graph, and get the
// oracle's results (the engine's side of the contract: graph_step.h).
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "cuda_test_support.h"
#include "graph_step.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

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
  BuilderParams bp = testing::builder_params_for(specs[0], Device::cuda(0));
  bp.max_num_reqs = kReqs;
  bp.max_num_tokens = kTokens;
  bp.max_model_len = kMaxSeqLen;
  auto builder = backend->make_builder(bp);
  ASSERT_TRUE(impl.ok() && builder.ok());
  ASSERT_EQ((*builder)->cudagraph_support(), AttentionCGSupport::kAlways);

  PersistentStep p(batches[0], kReqs, kTokens, kMaxBlocksPerReq, kMaxSeqLen);
  auto check = [&](const testing::HostBatch& batch, const char* what) {
    testing::HostTensor out, lse;
    p.download(out, lse);
    PersistentStep::expect_oracle(batch, out, lse, what);
  };
  cudaStream_t stream;
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamCreate(&stream));
  auto forward = [&](const AttentionMetadata& md) { p.forward(**impl, md, stream); };
  std::unique_ptr<AttentionMetadata> md = p.prepare(batches[0], **impl, **builder);
  ASSERT_NE(md, nullptr);
  forward(*md);
  check(batches[0], "256 decodes, eager");
  CapturedGraph graph;
  ASSERT_NO_FATAL_FAILURE(graph.capture(stream, [&] { forward(*md); }));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(graph.exec(), stream));
  check(batches[0], "256 decodes, graph");
  for (size_t i = 1; i < batches.size(); ++i) {
    std::unique_ptr<AttentionMetadata> next = p.prepare(batches[i], **impl, **builder);
    ASSERT_NE(next, nullptr);
    PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(graph.exec(), stream));
    check(batches[i], specs[i].name.c_str());
  }
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace pagedattn::test
