// CUDA-graph safety: capture one forward into a graph, then let the builder rewrite its metadata for
// a batch with other lengths and another prefill/decode mix of the same token and request counts,
// replay, and get the eager results (and the oracle's). The engine's side of the contract is
// reproduced here: every tensor the captured launch reads lives in persistent buffers whose
// contents change between steps, and max_query_len / max_seq_len are the padded upper bounds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "graph_step.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

constexpr int kMaxBlocksPerReq = 320;  // 5120 keys of block 16
constexpr int kMaxSeqLen = 5120;

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
  const AttentionBackend* backend = find_backend("FLASH_ATTN");
  StatusOr<std::unique_ptr<AttentionImpl>> impl = backend->make_impl(impl_params_for(*a));
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> builder =
      backend->make_builder(builder_params_for(*a));
  ASSERT_TRUE(impl.ok() && builder.ok());
  ASSERT_EQ((*builder)->cudagraph_support(), AttentionCGSupport::kAlways);
  PersistentStep p(*a, /*num_reqs=*/5, /*num_tokens=*/64, kMaxBlocksPerReq, kMaxSeqLen);
  cudaStream_t stream;
  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamCreate(&stream));
  auto forward = [&](const AttentionMetadata& md) { p.forward(**impl, md, stream); };

  // Step A: eager, then captured and replayed.
  std::unique_ptr<AttentionMetadata> md_a = p.prepare(*a, **impl, **builder);
  ASSERT_NE(md_a, nullptr);
  forward(*md_a);
  testing::HostTensor eager_a, eager_a_lse, graph_a, graph_a_lse;
  p.download(eager_a, eager_a_lse);
  CapturedGraph graph;
  ASSERT_NO_FATAL_FAILURE(graph.capture(stream, [&] { forward(*md_a); }));
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(graph.exec(), stream));
  p.download(graph_a, graph_a_lse);
  PersistentStep::expect_oracle(*a, eager_a, eager_a_lse, "step A eager");
  PersistentStep::expect_oracle(*a, graph_a, graph_a_lse, "step A graph");
  expect_same(eager_a, graph_a, 1e-2, "step A output");
  expect_same(eager_a_lse, graph_a_lse, 1e-4, "step A lse");

  // Step B: the builder rewrites its buffers; the same graph replays the new step.
  std::unique_ptr<AttentionMetadata> md_b = p.prepare(*b, **impl, **builder);
  ASSERT_NE(md_b, nullptr);
  PAGEDATTN_EXPECT_CUDA_OK(cudaGraphLaunch(graph.exec(), stream));
  testing::HostTensor graph_b, graph_b_lse, eager_b, eager_b_lse;
  p.download(graph_b, graph_b_lse);
  forward(*md_b);
  p.download(eager_b, eager_b_lse);
  PersistentStep::expect_oracle(*b, eager_b, eager_b_lse, "step B eager");
  PersistentStep::expect_oracle(*b, graph_b, graph_b_lse, "step B graph");
  expect_same(eager_b, graph_b, 1e-2, "step B output");
  expect_same(eager_b_lse, graph_b_lse, 1e-4, "step B lse");

  PAGEDATTN_EXPECT_CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace pagedattn::test
