// FLASH_ATTN and FLASHINFER under decode context parallelism across processes, one GPU each
// (scripts/dcp_multi_gpu.sh starts them), over a real NCCL group: every process builds the same
// batch, cuts its rank's share (its cache NaN where unused, block ids shuffled), runs it, and
// checks its heads against the same layer at N = 1 on its own GPU and the float64 oracle. Both
// combine paths, interleave 1 and 16, GQA with sinks and FP8 with per-head scales. Skips unless
// the script started it (rank_group.h).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "cuda_test_support.h"
#include "dcp_gpu_support.h"
#include "pagedattn/dcp_combine.h"
#include "rank_group.h"
#include "reference/compare.h"
#include "unit/dcp_printers.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;
using testing::HostBatch;

CaseSpec case_for(bool fp8, int world_size) {
  CaseSpec spec;
  spec.name = fp8 ? "fp8_hnd" : "gqa_sinks";
  spec.seed = 977 + (fp8 ? 1 : 0) * 31 + world_size;
  spec.dtype = DType::kBF16;
  spec.num_heads = 4 * world_size;
  spec.num_kv_heads = 4;
  spec.head_size = 128;  // built in every configuration
  spec.block_size = 32;
  // Decodes (one with no context, one long), a spec-verify decode of 4, chunked prefills and a
  // prefill without context.
  spec.seq_lens = {1, 77, 4001, 150, 300, 261};
  spec.query_lens = {1, 1, 1, 4, 40, 17};
  if (fp8) {
    spec.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    spec.kv_scale_per_head = true;
    spec.kv_layout = KVCacheLayout::kHND;
  } else {
    spec.sinks = true;
  }
  return spec;
}

using Param = std::tuple<std::string, int, DcpCommBackend, bool>;

class DcpRanks : public ::testing::TestWithParam<Param> {};

TEST_P(DcpRanks, ThisRankEqualsOneRankAndTheOracle) {
  const RankEnv env = rank_env();
  if (env.rank < 0) GTEST_SKIP() << "skipped: one rank of a group; run scripts/dcp_multi_gpu.sh";
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const auto [backend_name, interleave, path, fp8] = GetParam();
  const AttentionBackend* backend = find_backend(backend_name);
  ASSERT_NE(backend, nullptr) << backend_name;
  const CaseSpec spec = case_for(fp8, env.world_size);
  StatusOr<HostBatch> made =
      testing::make_host_batch(spec, spec.kv_layout.value_or(KVCacheLayout::kNHD));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  HostBatch& batch = *made;
  const reference::ReferenceOutputs exact = oracle(batch, host_cache_after_write(batch).view());

  // The group of this test (every rank runs the tests in one order, so the tags agree).
  const std::string tag = backend_name + "_i" + std::to_string(interleave) + "_" +
                          std::string(dcp_comm_backend_name(path)) + (fp8 ? "_fp8" : "_gqa");
  auto nccl = join_rank_group(env, tag);
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  // The host cut needs a group of the right size for its parameters; it is not run.
  auto host_group = make_in_process_group(env.world_size);
  ASSERT_TRUE(host_group.ok()) << host_group.status().to_string();
  StatusOr<testing::DcpRankStep> host_step = testing::make_dcp_rank_step(
      batch, env.world_size, env.rank, interleave, (*host_group)[env.rank].get(), path);
  ASSERT_TRUE(host_step.ok()) << host_step.status().to_string();
  StatusOr<DeviceStepInputs> inputs = upload_inputs(batch);
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  StatusOr<DeviceRankStep> step = upload_rank_step(*host_step, *inputs, nccl->get());
  ASSERT_TRUE(step.ok()) << step.status().to_string();

  auto builder = backend->make_builder(step->builder);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  auto impl = backend->make_impl(step->impl);
  ASSERT_TRUE(impl.ok()) << impl.status().to_string();
  auto metadata = (*builder)->build(0, step->meta);
  ASSERT_TRUE(metadata.ok()) << metadata.status().to_string();
  const KVCacheView cache(step->cache.view());
  ASSERT_TRUE((*impl)
                  ->do_kv_cache_update(inputs->key.view, inputs->value.view, cache,
                                       step->slot_mapping.view, inputs->scales(), nullptr)
                  .ok());
  const Status ran =
      (*impl)->forward(step->query, inputs->key.view, inputs->value.view, cache, **metadata,
                       step->output.view, step->lse.view, inputs->scales(), nullptr);
  ASSERT_TRUE(ran.ok()) << ran.to_string();

  StatusOr<reference::ReferenceOutputs> single = one_rank(batch, *backend);
  ASSERT_TRUE(single.ok()) << single.status().to_string();

  StatusOr<testing::HostTensor> out = to_host(step->output.view);
  StatusOr<testing::HostTensor> lse = to_host(step->lse.view);
  ASSERT_TRUE(out.ok() && lse.ok());
  const int64_t tokens = spec.num_tokens(), hq = spec.num_heads / env.world_size;
  const reference::Tolerance tol = reference::tolerance_for(spec.dtype);
  const auto expect_close = [&](const reference::ReferenceOutputs& whole, const char* what) {
    const reference::ReferenceOutputs want =
        head_slice(whole, tokens, spec.num_heads, spec.head_size, env.rank * hq, hq);
    const reference::Comparison c =
        reference::compare_to_reference(out->view(), lse->view(), want.out, want.lse, tol);
    EXPECT_TRUE(c.pass) << "rank " << env.rank << " of " << env.world_size << " vs " << what << ": "
                        << c;
  };
  expect_close(exact, "the oracle");
  expect_close(*single, "N = 1");
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [backend, interleave, path, fp8] = info.param;
  return backend + "_i" + std::to_string(interleave) + "_" +
         std::string(dcp_comm_backend_name(path)) + (fp8 ? "_fp8_hnd" : "_gqa_sinks");
}

INSTANTIATE_TEST_SUITE_P(
    Backends, DcpRanks,
    ::testing::Combine(::testing::Values("FLASH_ATTN", "FLASHINFER"), ::testing::Values(1, 16),
                       ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Bool()),
    param_name);

}  // namespace
}  // namespace pagedattn::test
