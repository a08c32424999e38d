// FLASH_ATTN and FLASHINFER under decode context parallelism on one GPU: N in {2, 4} ranks
// (threads with a stream each over the device in-process group) each store 1/N of every
// sequence's tokens in a cache of their own (unused slots NaN, block ids shuffled); each rank's
// output and LSE for its heads (poisoned before forward) must equal, within the oracle's
// tolerance, the same layer at N = 1 on the same backend, CPU_ATTN's DCP result over the same
// shards, and the float64 oracle; on steps mixing decodes (one with no context, one long enough to
// split its local keys), a spec-verify decode of 4, chunked prefills and a prefill without
// context; both combine paths, interleave 1, 16 and the block size, GQA with sinks, FP8 with
// per-head scales in HND, soft cap in f16, non-causal, a sliding window (cut at absolute positions
// among each rank's keys, some rows seeing none of a rank's), and a step whose every request has
// context on every rank (so that pass (a) may run v3 on a Hopper GPU). test_dcp_gpu_refusals.cc has
// what they refuse.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_support.h"
#include "dcp/in_process_group.h"
#include "dcp_gpu_support.h"
#include "pagedattn/dcp_combine.h"
#include "reference/compare.h"
#include "test_flash_attn_support.h"
#include "testing/step_runner.h"
#include "unit/dcp_printers.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;
using testing::DcpRankStep;
using testing::HostBatch;

enum class Feature { kGqaSinks, kFp8Hnd, kSoftCapF16, kNonCausal, kWindow, kLongContexts };

std::string feature_name(Feature f) {
  switch (f) {
    case Feature::kGqaSinks: return "gqa_sinks";
    case Feature::kFp8Hnd: return "fp8_hnd";
    case Feature::kSoftCapF16: return "softcap_f16";
    case Feature::kNonCausal: return "noncausal";
    case Feature::kWindow: return "window";
    case Feature::kLongContexts: return "long_contexts";
  }
  return "";
}

void PrintTo(Feature f, std::ostream* os) {
  *os << feature_name(f);
}

constexpr int kBlockSize = 32;

// Query heads per rank and KV heads: GQA for every N, with each rank reading two KV heads at N = 2
// (Hkv a multiple of N) and part of one at N = 4 and 8 for gqa_sinks (Hkv a divisor of N).
int heads_per_rank(Feature f) {
  return f == Feature::kGqaSinks ? 4 : 2;
}
int kv_heads(Feature f) {
  return f == Feature::kGqaSinks ? 4 : 2;
}

// Decodes first (FLASHINFER's order), one of them with no context and one of 2001 keys, then a
// spec-verify decode of 4, chunked prefills and a prefill without context. window: 99 keys back,
// and a chunk inside its reach from every row. long_contexts: every context at least 256 tokens
// (every rank stores some of each), and a chunk of 200.
CaseSpec case_for(Feature feature, int world_size) {
  CaseSpec spec;
  spec.name = feature_name(feature);
  spec.seed = 4321 + static_cast<uint64_t>(feature) * 17 + world_size;
  spec.dtype = DType::kBF16;
  spec.num_heads = heads_per_rank(feature) * world_size;
  spec.num_kv_heads = kv_heads(feature);
  spec.head_size = 128;  // built in every configuration (PAGEDATTN_HEAD_SIZES=128 too)
  spec.block_size = kBlockSize;
  spec.seq_lens = {1, 3, 77, 514, 2001, 150, 300, 40, 261};
  spec.query_lens = {1, 1, 1, 1, 1, 4, 40, 40, 17};
  switch (feature) {
    case Feature::kGqaSinks: spec.sinks = true; break;
    case Feature::kFp8Hnd:
      spec.kv_cache_dtype = KVCacheDType::kFP8E4M3;
      spec.kv_scale_per_head = true;
      spec.kv_layout = KVCacheLayout::kHND;
      break;
    case Feature::kSoftCapF16:
      spec.dtype = DType::kF16;
      spec.logits_soft_cap = 2.0;
      break;
    case Feature::kNonCausal: spec.causal = false; break;
    case Feature::kWindow:
      spec.sliding_window = SlidingWindow{99, 0};
      spec.seq_lens.push_back(60);
      spec.query_lens.push_back(20);
      break;
    case Feature::kLongContexts:
      spec.seq_lens = {257, 514, 2001, 700, 600};
      spec.query_lens = {1, 1, 1, 4, 200};
      break;
  }
  return spec;
}

using Param = std::tuple<std::string, int, int, DcpCommBackend, Feature>;

class DcpGpuForward : public ::testing::TestWithParam<Param> {};

TEST_P(DcpGpuForward, EachRankEqualsOneRankCpuAttnAndTheOracle) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const auto [backend_name, world_size, interleave, path, feature] = GetParam();
  const AttentionBackend* backend = find_backend(backend_name);
  ASSERT_NE(backend, nullptr) << backend_name;
  const CaseSpec spec = case_for(feature, world_size);
  StatusOr<HostBatch> made =
      testing::make_host_batch(spec, spec.kv_layout.value_or(KVCacheLayout::kNHD));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  HostBatch& batch = *made;
  const KVCacheAllocation written = host_cache_after_write(batch);
  const reference::ReferenceOutputs exact = oracle(batch, written.view());

  // Every rank's share, cut on the host (CPU_ATTN runs the host copies, the GPU the device ones).
  auto host_group = make_in_process_group(world_size);
  ASSERT_TRUE(host_group.ok()) << host_group.status().to_string();
  auto device_group = dcp::make_in_process_group(world_size, Device::cuda(0));
  ASSERT_TRUE(device_group.ok()) << device_group.status().to_string();
  StatusOr<DeviceStepInputs> inputs = upload_inputs(batch);
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  std::vector<DcpRankStep> host_steps;
  std::vector<DeviceRankStep> gpu_steps;
  for (int r = 0; r < world_size; ++r) {
    StatusOr<DcpRankStep> step =
        testing::make_dcp_rank_step(batch, world_size, r, interleave, (*host_group)[r].get(), path);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    StatusOr<DeviceRankStep> on_gpu = upload_rank_step(*step, *inputs, (*device_group)[r].get());
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
    host_steps.push_back(std::move(*step));
    gpu_steps.push_back(std::move(*on_gpu));
  }

  for (const Status& s : testing::run_dcp_ranks(batch, host_steps, *host_group)) {
    ASSERT_TRUE(s.ok()) << "CPU_ATTN: " << s.to_string();
  }
  for (const Status& s : run_gpu_ranks(*backend, gpu_steps, *inputs, *device_group)) {
    ASSERT_TRUE(s.ok()) << backend_name << ": " << s.to_string();
  }
  StatusOr<reference::ReferenceOutputs> single = one_rank(batch, *backend);
  ASSERT_TRUE(single.ok()) << single.status().to_string();

  const int64_t tokens = spec.num_tokens(), dim = spec.head_size;
  const int64_t hq = heads_per_rank(feature);
  const reference::Tolerance tol = reference::tolerance_for(spec.dtype);
  for (int r = 0; r < world_size; ++r) {
    StatusOr<testing::HostTensor> out = to_host(gpu_steps[r].output.view);
    StatusOr<testing::HostTensor> lse = to_host(gpu_steps[r].lse.view);
    ASSERT_TRUE(out.ok() && lse.ok());
    const auto slice = [&](const reference::ReferenceOutputs& whole) {
      return head_slice(whole, tokens, spec.num_heads, dim, r * hq, hq);
    };
    const auto expect_close = [&](const reference::ReferenceOutputs& want, const char* what) {
      const reference::Comparison c =
          reference::compare_to_reference(out->view(), lse->view(), want.out, want.lse, tol);
      EXPECT_TRUE(c.pass) << "rank " << r << " vs " << what << ": " << c;
    };
    expect_close(slice(exact), "the oracle");
    expect_close(slice(*single), "N = 1");
    expect_close(as_reference(host_steps[r].output.view(), host_steps[r].lse.view()),
                 "CPU_ATTN under DCP");
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [backend, world_size, interleave, path, feature] = info.param;
  return backend + "_n" + std::to_string(world_size) + "_i" + std::to_string(interleave) + "_" +
         std::string(dcp_comm_backend_name(path)) + "_" + feature_name(feature);
}

INSTANTIATE_TEST_SUITE_P(
    FlashAttn, DcpGpuForward,
    ::testing::Combine(::testing::Values("FLASH_ATTN"), ::testing::Values(2, 4, 8),
                       ::testing::Values(1, 16, kBlockSize),
                       ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Values(Feature::kGqaSinks, Feature::kFp8Hnd, Feature::kSoftCapF16,
                                         Feature::kNonCausal, Feature::kWindow,
                                         Feature::kLongContexts)),
    param_name);

// FLASHINFER runs the GPU layer's same sequence; a smaller grid.
INSTANTIATE_TEST_SUITE_P(
    FlashInfer, DcpGpuForward,
    ::testing::Combine(::testing::Values("FLASHINFER"), ::testing::Values(2, 4, 8),
                       ::testing::Values(1, 16, kBlockSize),
                       ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Values(Feature::kGqaSinks, Feature::kFp8Hnd, Feature::kSoftCapF16,
                                         Feature::kWindow)),
    param_name);

}  // namespace
}  // namespace pagedattn::test
