// Bad DCP parameters are refused with a Status naming the parameter, its value and what is
// allowed, one test per refusal: the step's DCP fields, the builders (cascade under DCP, backends
// that do not serve DCP), the layer's dcp_group (a host group on a GPU backend) and
// dcp_comm_backend, forward's agreement between the metadata and the group (on every rank, with
// no rank left waiting), and the selector.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/builder_limits.h"
#include "pagedattn/config.h"
#include "pagedattn/selector.h"
#include "unit/dcp_cpu_step.h"
#include "unit/status_checks.h"

namespace pagedattn {
namespace {

using testing::DcpRankStep;
using testing::HostBatch;

// The value of a StatusOr the test expects to hold one.
template <typename T>
T take(StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status().message();
  return std::move(*value);
}

// A small step of two ranks (2 query heads each, 1 KV head, blocks of 16).
struct TwoRanks {
  HostBatch batch;
  std::vector<std::unique_ptr<Communicator>> group;
  std::vector<DcpRankStep> steps;

  static TwoRanks make(int interleave = 1) {
    testing::CaseSpec spec;
    spec.dtype = DType::kF32;
    spec.num_heads = 4;
    spec.num_kv_heads = 1;
    spec.head_size = 64;
    spec.block_size = 16;
    spec.seq_lens = {40, 9};
    spec.query_lens = {1, 3};
    TwoRanks t{take(testing::make_host_batch(spec, KVCacheLayout::kNHD)),
               take(make_in_process_group(2)),
               {}};
    t.steps.reserve(2);
    for (int r = 0; r < 2; ++r) {
      t.steps.push_back(take(testing::make_dcp_rank_step(t.batch, 2, r, interleave,
                                                         t.group[r].get(), DcpCommBackend::kAgRs)));
    }
    return t;
  }
  const AttentionBackend& cpu() const { return *find_backend("CPU_ATTN"); }
};

TEST(DcpRefusals, MetadataRefusesAWorldSizeBelowOne) {
  TwoRanks t = TwoRanks::make();
  t.steps[0].meta.dcp_world_size = 0;
  EXPECT_TRUE(
      refused_with(t.steps[0].meta.validate(16, 100), "dcp_world_size = 0 (allowed: 1 to 1024)"));
}

TEST(DcpRefusals, MetadataRefusesARankOutsideTheGroup) {
  TwoRanks t = TwoRanks::make();
  t.steps[1].meta.dcp_rank = 2;
  EXPECT_TRUE(refused_with(t.steps[1].meta.validate(16, 100),
                           "dcp_rank = 2 (allowed: [0, dcp_world_size = 2))"));
}

TEST(DcpRefusals, MetadataRefusesAnInterleaveThatDoesNotDivideTheBlock) {
  TwoRanks t = TwoRanks::make();
  t.steps[0].meta.cp_kv_cache_interleave_size = 3;
  EXPECT_TRUE(refused_with(t.steps[0].meta.validate(16, 100),
                           "cp_kv_cache_interleave_size = 3 must be at least 1 and divide "
                           "block_size = 16"));
}

TEST(DcpRefusals, MetadataRefusesASlotForATokenAnotherRankStores) {
  TwoRanks t = TwoRanks::make();
  // Request 0's new token is at position 39, which rank 1 stores: rank 0's slot must be -1.
  t.steps[0].slot_mapping.data<int64_t>()[0] = 5;
  EXPECT_TRUE(refused_with(t.steps[0].meta.validate(16, 100),
                           "slot_mapping[0] = 5 does not match request 0 position 39 (stored by "
                           "dcp rank 1, so this rank's slot is -1)"));
}

TEST(DcpRefusals, MetadataRefusesATableTooNarrowForTheRanksShare) {
  TwoRanks t = TwoRanks::make();
  // Rank 0 stores 20 of request 0's 40 tokens: two blocks of 16; give it a table of one column.
  const TensorView& table = t.steps[0].block_table.view();
  const int64_t shape[2] = {table.size(0), 1};
  const int64_t strides[2] = {table.stride(0), 1};
  t.steps[0].meta.block_table_tensor =
      TensorView(table.data(), DType::kI32, Device::cpu(), shape, strides);
  EXPECT_TRUE(refused_with(t.steps[0].meta.validate(16, 100),
                           "request 0 has seq_len 40 (20 of them on dcp_rank 0) and needs 2 "
                           "blocks"));
}

TEST(DcpRefusals, CpuBuilderRefusesCascadeUnderDcp) {
  TwoRanks t = TwoRanks::make();
  auto builder = take(t.cpu().make_builder(t.steps[0].builder));
  EXPECT_TRUE(refused_with(builder->build(16, t.steps[0].meta).status(),
                           "common_prefix_len = 16 with dcp_world_size = 2: CPU_ATTN runs no "
                           "cascade under decode context parallelism, as vLLM (allowed: 0)"));
}

TEST(DcpRefusals, ImplRefusesAlibiUnderDcp) {
  TwoRanks t = TwoRanks::make();
  AttentionImplParams p = t.steps[0].impl;
  p.alibi_slopes = {0.5f, 0.25f};
  EXPECT_TRUE(refused_with(t.cpu().make_impl(p).status(),
                           "alibi_slopes given with a dcp_group of world size 2"));
}

TEST(DcpRefusals, ImplRefusesEncoderLayersUnderDcp) {
  TwoRanks t = TwoRanks::make();
  AttentionImplParams p = t.steps[0].impl;
  p.attn_type = AttentionType::kEncoderOnly;
  EXPECT_TRUE(refused_with(t.cpu().make_impl(p).status(),
                           "attn_type = encoder_only with a dcp_group of world size 2: DCP shards "
                           "the KV cache of decoder layers (allowed: decoder)"));
}

TEST(DcpRefusals, ImplRefusesHeadsThatStraddleKvGroups) {
  std::vector<std::unique_ptr<Communicator>> group = take(make_in_process_group(4));
  AttentionImplParams p;
  p.num_heads = 6;
  p.num_kv_heads = 6;
  p.head_size = 64;
  p.dtype = DType::kF32;
  p.dcp_group = group[0].get();
  EXPECT_TRUE(refused_with(find_backend("CPU_ATTN")->make_impl(p).status(),
                           "num_kv_heads = 6 with dcp_world_size = 4: a rank's query heads would "
                           "straddle KV-head groups unevenly"));
}

TEST(DcpRefusals, ImplRefusesAnUnknownCommBackend) {
  TwoRanks t = TwoRanks::make();
  AttentionImplParams p = t.steps[0].impl;
  p.dcp_comm_backend = static_cast<DcpCommBackend>(7);
  EXPECT_TRUE(
      refused_with(t.cpu().make_impl(p).status(), "dcp_comm_backend = 7 (allowed: ag_rs, a2a)"));
}

// The GPU backends combine on the layer's device: a host group is refused by name (CUDA builds),
// as is everything in a build without CUDA.
TEST(DcpRefusals, GpuBackendsRefuseAHostDcpGroup) {
  TwoRanks t = TwoRanks::make();
  for (const char* name : {"FLASH_ATTN", "FLASHINFER"}) {
    AttentionImplParams p = t.steps[0].impl;
    p.device = Device::cuda(0);
    p.dtype = DType::kBF16;
    p.head_size = 128;  // built in every CUDA configuration
    EXPECT_TRUE(refused_with(find_backend(name)->make_impl(p).status(),
                             PAGEDATTN_WITH_CUDA
                                 ? "dcp_group's buffers live on cpu; the layer runs on cuda:0"
                                 : "is not built in this version"))
        << name;
  }
}

TEST(DcpRefusals, ForwardRefusesShardedMetadataWithoutAGroup) {
  TwoRanks t = TwoRanks::make();
  DcpRankStep& step = t.steps[0];
  step.impl.dcp_group = nullptr;
  auto builder = take(t.cpu().make_builder(step.builder));
  auto impl = take(t.cpu().make_impl(step.impl));
  auto metadata = take(builder->build(0, step.meta));
  EXPECT_TRUE(
      refused_with(impl->forward(step.query, t.batch.key.view(), t.batch.value.view(),
                                 KVCacheView(step.cache.view()), *metadata, step.output.view(),
                                 step.lse.view(), t.batch.scales()),
                   "metadata is dcp_rank 0 of dcp_world_size 2 but the layer has no dcp_group"));
}

TEST(DcpRefusals, ARanksRefusalFailsTheStepOnEveryRank) {
  TwoRanks t = TwoRanks::make();
  // Rank 1's metadata claims rank 0's place (its slots -1 where rank 0 stores, so it validates).
  t.steps[1].meta.dcp_rank = 0;
  t.steps[1].meta.slot_mapping = t.steps[0].slot_mapping.view();
  t.steps[1].meta.block_table_tensor = t.steps[0].block_table.view();
  const std::vector<Status> results = testing::run_dcp_ranks(t.batch, t.steps, t.group);
  EXPECT_TRUE(refused_with(results[0], "dcp rank 1 refused its forward call"));
  EXPECT_TRUE(refused_with(results[1],
                           "metadata is dcp_rank 0 of dcp_world_size 2; the layer's dcp_group is "
                           "rank 1 of 2 (they must agree)"));
}

TEST(DcpRefusals, EveryBackendServesDcpAndTheSelectorSaysNothingAgainstIt) {
  for (const char* name : {"FLASH_ATTN", "FLASHINFER", "CPU_ATTN"}) {
    EXPECT_TRUE(find_backend(name)->supports_dcp()) << name;
  }
  AttentionSelectorConfig config;
  config.num_heads = 4;
  config.num_kv_heads = 1;
  config.head_size = 64;
  config.dcp_world_size = 2;
  StatusOr<BackendSelection> chosen = select_backend(config);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  for (const BackendRejection& rejection : chosen->rejected) {  // other reasons only (the device)
    for (const std::string& reason : rejection.reasons) {
      EXPECT_EQ(reason.find("decode context parallelism"), std::string::npos)
          << rejection.backend << ": " << reason;
    }
  }
}

TEST(DcpRefusals, SelectorNamesWhatDcpCannotServe) {
  AttentionSelectorConfig config;
  config.num_heads = 4;
  config.num_kv_heads = 1;
  config.head_size = 64;
  config.dcp_world_size = 2;
  config.use_sliding_window = true;  // every backend cuts the window at absolute positions
  for (const char* name : {"FLASH_ATTN", "FLASHINFER", "CPU_ATTN"}) {
    const std::vector<std::string> reasons = find_backend(name)->validate_configuration(config);
    EXPECT_TRUE(std::none_of(reasons.begin(), reasons.end(), [](const std::string& r) {
      return r.find("window") != r.npos;
    })) << name;
  }
  config.use_sliding_window = false;
  config.use_alibi = true;
  for (const char* name : {"FLASH_ATTN", "FLASHINFER", "CPU_ATTN"}) {
    const std::vector<std::string> reasons = find_backend(name)->validate_configuration(config);
    EXPECT_NE(std::find(reasons.begin(), reasons.end(),
                        "ALiBi under decode context parallelism (a rank's keys are not at "
                        "contiguous positions)"),
              reasons.end())
        << name;
  }
}

TEST(DcpRefusals, SelectorRefusesAGroupSizeOutOfRange) {
  AttentionSelectorConfig config;
  config.dcp_world_size = 0;
  EXPECT_TRUE(
      refused_with(select_backend(config).status(), "dcp_world_size = 0 (allowed: 1 to 1024)"));
}

TEST(DcpRefusals, SelectorRefusesHeadsThatStraddleKvGroups) {
  AttentionSelectorConfig config;
  config.num_heads = 6;
  config.num_kv_heads = 6;
  config.dcp_world_size = 4;
  EXPECT_TRUE(
      refused_with(select_backend(config).status(), "num_kv_heads = 6 with dcp_world_size = 4"));
}

}  // namespace
}  // namespace pagedattn
