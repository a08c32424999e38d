// What FLASH_ATTN and FLASHINFER refuse under decode context parallelism, each refusal a Status
// naming the parameter, its value and what is allowed, returned on every rank before any rank
// waits in a collective: a host communicator, a forced kernel generation 3, a shared prefix (no
// cascade under DCP, as vLLM), and metadata built for CUDA-graph capture.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "dcp/in_process_group.h"
#include "dcp_gpu_support.h"
#include "unit/status_checks.h"

namespace pagedattn::test {
namespace {

// A small step of two ranks on cuda:0: bf16, 2 query heads each over 2 KV heads, blocks of 32.
struct TwoRanks {
  testing::HostBatch batch;
  std::vector<std::unique_ptr<Communicator>> host_group, device_group;
  DeviceStepInputs inputs;
  std::vector<DeviceRankStep> steps;

  static StatusOr<std::unique_ptr<TwoRanks>> make() {
    testing::CaseSpec spec;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_size = 128;
    spec.block_size = 32;
    spec.seq_lens = {70, 9};
    spec.query_lens = {1, 3};
    auto t = std::make_unique<TwoRanks>();
    PAGEDATTN_ASSIGN_OR_RETURN(t->batch, testing::make_host_batch(spec, KVCacheLayout::kNHD));
    PAGEDATTN_ASSIGN_OR_RETURN(t->host_group, make_in_process_group(2));
    PAGEDATTN_ASSIGN_OR_RETURN(t->device_group, dcp::make_in_process_group(2, Device::cuda(0)));
    PAGEDATTN_ASSIGN_OR_RETURN(t->inputs, upload_inputs(t->batch));
    for (int r = 0; r < 2; ++r) {
      PAGEDATTN_ASSIGN_OR_RETURN(
          const testing::DcpRankStep host,
          testing::make_dcp_rank_step(t->batch, 2, r, 1, t->host_group[r].get(),
                                      DcpCommBackend::kAgRs));
      PAGEDATTN_ASSIGN_OR_RETURN(DeviceRankStep step,
                                 upload_rank_step(host, t->inputs, t->device_group[r].get()));
      t->steps.push_back(std::move(step));
    }
    return t;
  }
};

const char* const kGpuBackends[] = {"FLASH_ATTN", "FLASHINFER"};

TEST(DcpGpuRefusals, ImplRefusesAHostGroupAndAForcedV3) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  auto t = TwoRanks::make();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  for (const char* name : kGpuBackends) {
    const AttentionBackend& backend = *find_backend(name);
    AttentionImplParams p = (*t)->steps[0].impl;
    p.dcp_group = (*t)->host_group[0].get();
    EXPECT_TRUE(refused_with(backend.make_impl(p).status(),
                             "dcp_group's buffers live on cpu; the layer runs on cuda:0"))
        << name;
    p = (*t)->steps[0].impl;
    p.kernel_generation = 3;
    EXPECT_TRUE(refused_with(backend.make_impl(p).status(),
                             "kernel_generation = 3 with a dcp_group of world size 2"))
        << name;
  }
}

TEST(DcpGpuRefusals, BuildRefusesASharedPrefix) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  auto t = TwoRanks::make();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  for (const char* name : kGpuBackends) {
    auto builder = find_backend(name)->make_builder((*t)->steps[0].builder);
    ASSERT_TRUE(builder.ok()) << builder.status().to_string();
    EXPECT_TRUE(refused_with((*builder)->build(32, (*t)->steps[0].meta).status(),
                             "common_prefix_len = 32 with dcp_world_size = 2: no cascade under "
                             "decode context parallelism"))
        << name;
  }
}

TEST(DcpGpuRefusals, CaptureMetadataIsRefusedOnEveryRank) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  auto t = TwoRanks::make();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  for (const char* name : kGpuBackends) {
    const AttentionBackend& backend = *find_backend(name);
    const std::vector<Status> results = run_on_rank_streams(
        (*t)->device_group, [&](Communicator& comm, cudaStream_t stream) -> Status {
          DeviceRankStep& step = (*t)->steps[comm.rank()];
          PAGEDATTN_ASSIGN_OR_RETURN(auto builder, backend.make_builder(step.builder));
          PAGEDATTN_ASSIGN_OR_RETURN(auto impl, backend.make_impl(step.impl));
          PAGEDATTN_ASSIGN_OR_RETURN(auto metadata,
                                     builder->build_for_cudagraph_capture(step.meta));
          return impl->forward(step.query, (*t)->inputs.key.view, (*t)->inputs.value.view,
                               KVCacheView(step.cache.view()), *metadata, step.output.view,
                               step.lse.view, (*t)->inputs.scales(), stream);
        });
    for (const Status& s : results) {
      EXPECT_TRUE(refused_with(s, "metadata built for CUDA-graph capture with dcp_world_size = 2"))
          << name;
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
