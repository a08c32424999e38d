// AttentionLayer carries decode context parallelism: a layer with a dcp_group gives the selector
// its world size, the impl its group and combine path, and each step its sharding (shard_step), so
// N ranks made from layers alone equal the N = 1 layer; without shard_step the ranks refuse the
// step.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/attention_layer.h"
#include "pagedattn/selector.h"
#include "reference/compare.h"
#include "support/cpu_run.h"
#include "unit/dcp_cpu_step.h"
#include "unit/dcp_printers.h"

namespace pagedattn {
namespace {

using testing::CaseSpec;
using testing::DcpRankStep;
using testing::HostBatch;

constexpr int kHeadsPerRank = 2;

// Decodes, a spec-verify of 4, chunked prefills and a prefill without context, with sinks (sliced
// per rank by the layer) and GQA: N * 2 query heads over 2 KV heads.
CaseSpec case_for(int world_size) {
  CaseSpec spec;
  spec.name = "layer";
  spec.seed = 4321 + world_size;
  spec.dtype = DType::kF32;
  spec.num_heads = kHeadsPerRank * world_size;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.block_size = 32;
  spec.seq_lens = {1, 77, 514, 150, 300, 40};
  spec.query_lens = {1, 1, 1, 4, 40, 40};
  spec.sinks = true;
  return spec;
}

// Rank `rank`'s layer: the whole model's layer with this rank's heads and sinks, and the group.
AttentionLayer rank_layer(const AttentionLayer& whole, Communicator* group, DcpCommBackend path,
                          int interleave) {
  AttentionLayer layer = whole;
  const int first = group->rank() * kHeadsPerRank;
  layer.num_heads = kHeadsPerRank;
  layer.sinks.assign(whole.sinks.begin() + first, whole.sinks.begin() + first + kHeadsPerRank);
  layer.dcp_group = group;
  layer.dcp_comm_backend = path;
  layer.cp_kv_cache_interleave_size = interleave;
  return layer;
}

// Heads [first, first + count) of a run's output [T, H, D] and LSE [H, T], as doubles.
void head_slice(const cpu_test::RunResult& run, int64_t first, int64_t count,
                std::vector<double>& out, std::vector<double>& lse) {
  const TensorView o = run.output.view(), l = run.lse.view();
  const int64_t tokens = o.size(0), heads = o.size(1), dim = o.size(2);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = first; h < first + count; ++h) {
      for (int64_t d = 0; d < dim; ++d) {
        out.push_back(load_as_float(o.data(), o.dtype(), (t * heads + h) * dim + d));
      }
    }
  }
  for (int64_t h = first; h < first + count; ++h) {
    for (int64_t t = 0; t < tokens; ++t)
      lse.push_back(load_as_float(l.data(), l.dtype(), h * tokens + t));
  }
}

struct Ranks {
  std::vector<std::unique_ptr<Communicator>> group;
  std::vector<DcpRankStep> steps;
};

// Each rank's cache, tables and query slice as an engine holds them, with the builder and impl
// parameters made from the rank's layer and, when `shard`, the step's DCP fields from shard_step.
Ranks ranks_from_layers(const HostBatch& batch, int world_size, int interleave, DcpCommBackend path,
                        bool shard) {
  Ranks ranks;
  StatusOr<std::vector<std::unique_ptr<Communicator>>> group = make_in_process_group(world_size);
  EXPECT_TRUE(group.ok());
  ranks.group = std::move(*group);
  const AttentionLayer whole =
      testing::attention_layer_for(batch.spec, batch.layout, Device::cpu());
  for (int r = 0; r < world_size; ++r) {
    StatusOr<DcpRankStep> step = testing::make_dcp_rank_step(batch, world_size, r, interleave,
                                                             nullptr, DcpCommBackend::kAgRs);
    EXPECT_TRUE(step.ok()) << step.status().message();
    const AttentionLayer layer = rank_layer(whole, ranks.group[r].get(), path, interleave);
    step->impl = impl_params(layer);
    step->builder = builder_params(layer);
    step->meta.dcp_world_size = 1;
    step->meta.dcp_rank = 0;
    step->meta.cp_kv_cache_interleave_size = 1;
    if (shard) shard_step(layer, step->meta);
    ranks.steps.push_back(std::move(*step));
  }
  return ranks;
}

class DcpAttentionLayer : public ::testing::TestWithParam<std::tuple<int, int, DcpCommBackend>> {};

TEST_P(DcpAttentionLayer, RanksMadeFromLayersEqualOneRank) {
  const auto [world_size, interleave, path] = GetParam();
  StatusOr<HostBatch> batch = testing::make_host_batch(case_for(world_size), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  StatusOr<cpu_test::RunResult> single = cpu_test::run_against_reference(*batch);
  ASSERT_TRUE(single.ok()) << single.status().message();
  ASSERT_TRUE(single->comparison.pass) << single->comparison;

  Ranks ranks = ranks_from_layers(*batch, world_size, interleave, path, /*shard=*/true);
  for (const DcpRankStep& step : ranks.steps) {
    AttentionLayer layer = testing::attention_layer_for(batch->spec, batch->layout, Device::cpu());
    layer = rank_layer(layer, ranks.group[step.rank].get(), path, interleave);
    const AttentionSelectorConfig config = selector_config(layer);
    EXPECT_EQ(config.dcp_world_size, world_size);
    StatusOr<BackendSelection> selected = select_backend(config);
    ASSERT_TRUE(selected.ok()) << selected.status().message();
    EXPECT_EQ(selected->backend->name(), "CPU_ATTN");
    EXPECT_EQ(step.meta.dcp_rank, step.rank);
    EXPECT_EQ(step.meta.cp_kv_cache_interleave_size, interleave);
  }
  for (const Status& s : testing::run_dcp_ranks(*batch, ranks.steps, ranks.group)) {
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const reference::Tolerance tol = reference::tolerance_for(batch->spec.dtype);
  for (const DcpRankStep& step : ranks.steps) {
    std::vector<double> out, lse;
    head_slice(*single, int64_t{step.rank} * kHeadsPerRank, kHeadsPerRank, out, lse);
    const reference::Comparison vs_single =
        reference::compare_to_reference(step.output.view(), step.lse.view(), out, lse, tol);
    EXPECT_TRUE(vs_single.pass) << "rank " << step.rank << " vs N = 1: " << vs_single;
  }
}

TEST_P(DcpAttentionLayer, StepsNotShardedByTheLayerAreRefused) {
  const auto [world_size, interleave, path] = GetParam();
  StatusOr<HostBatch> batch = testing::make_host_batch(case_for(world_size), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  Ranks ranks = ranks_from_layers(*batch, world_size, interleave, path, /*shard=*/false);
  for (const Status& s : testing::run_dcp_ranks(*batch, ranks.steps, ranks.group)) {
    // The rank's table holds its 1/N of the blocks; read as the whole sequence's it is too narrow.
    EXPECT_NE(s.message().find("block_table_tensor is too narrow"), std::string::npos)
        << s.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, DcpAttentionLayer,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values(1, 16),
                                            ::testing::Values(DcpCommBackend::kAgRs,
                                                              DcpCommBackend::kA2a)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_i" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  std::string(dcp_comm_backend_name(std::get<2>(info.param)));
                         });

TEST(DcpAttentionLayer, WithoutAGroupTheLayerIsOneRank) {
  AttentionLayer layer;
  layer.num_heads = 4;
  layer.num_kv_heads = 2;
  layer.head_size = 64;
  layer.cp_kv_cache_interleave_size = 16;
  const DcpShard shard = dcp_shard(layer);
  EXPECT_EQ(shard.world_size, 1);
  EXPECT_EQ(shard.rank, 0);
  EXPECT_EQ(shard.interleave, 16);
  EXPECT_EQ(selector_config(layer).dcp_world_size, 1);
  EXPECT_EQ(impl_params(layer).dcp_group, nullptr);
}

}  // namespace
}  // namespace pagedattn
