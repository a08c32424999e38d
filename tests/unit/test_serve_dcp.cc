// The serve loop under DCP: the counted communicator counts what a rank receives from the others in
// each collective, and a seeded DCP run (N ranks beside N = 1) passes every check (the oracle on
// N = 1, every rank's heads against N = 1's), holds 1/N of the KV cache per rank, moves bytes every
// step and reproduces its outputs bit for bit.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "pagedattn/communicator.h"
#include "serve/engine.h"
#include "serve/workload.h"
#include "testing/counted_communicator.h"
#include "unit/dcp_printers.h"

namespace pagedattn::serve {
namespace {

TEST(ServeDcp, CountedCommunicatorCountsWhatARankReceives) {
  constexpr int kRanks = 4, kChunk = 6;
  auto group = make_in_process_group(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<double> received(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      testing::CountedCommunicator comm(*(*group)[r]);
      std::vector<float> one(kChunk, 1.0f), all(kRanks * kChunk);
      const TensorView chunk(one.data(), DType::kF32, Device::cpu(), {kChunk});
      const TensorView every(all.data(), DType::kF32, Device::cpu(), {kRanks * kChunk});
      std::vector<float> sent(kRanks * kChunk, 2.0f);
      const TensorView send_all(sent.data(), DType::kF32, Device::cpu(), {kRanks * kChunk});
      EXPECT_TRUE(comm.all_gather(chunk, every).ok());
      EXPECT_TRUE(comm.reduce_scatter(send_all, chunk).ok());
      EXPECT_TRUE(comm.all_to_all(send_all, every).ok());
      received[r] = comm.take_received_bytes();
      EXPECT_EQ(comm.take_received_bytes(), 0.0);
    });
  }
  for (std::thread& t : threads) t.join();
  // Each collective: the other 3 ranks' chunks of 6 floats.
  for (double bytes : received) EXPECT_EQ(bytes, 3 * (3 * kChunk * 4.0));
}

EngineConfig dcp_engine(int world_size, DcpCommBackend comm) {
  EngineConfig c;
  c.executor.model = *model_preset("tiny");
  c.executor.model.num_layers = 2;
  c.executor.model.num_heads = 8;
  c.executor.model.num_kv_heads = 2;
  c.executor.model.head_size = 64;
  c.executor.model.max_model_len = 1024;
  c.executor.backend = "cpu";
  c.executor.num_blocks = 40;
  c.executor.max_num_seqs = 8;
  c.executor.max_num_batched_tokens = 128;
  c.scheduler = {8, 128};
  c.check_every = 3;
  c.digest = true;
  c.dcp = {world_size, comm};
  return c;
}

Workload dcp_workload() {
  WorkloadConfig w;
  w.num_requests = 10;
  w.arrival_rate = 2.0;
  w.prompt_lens = "uniform:20:300";
  w.output_lens = "uniform:4:24";
  w.shared_prefix_len = 64;
  w.shared_prefix_share = 1.0;
  return *generate_workload(w, 1024);
}

class ServeDcpRun : public ::testing::TestWithParam<std::tuple<int, DcpCommBackend>> {};

TEST_P(ServeDcpRun, RanksEqualOneRankOnOneNthOfTheCache) {
  const auto [world_size, comm] = GetParam();
  const EngineConfig config = dcp_engine(world_size, comm);
  StatusOr<EngineRun> run = run_engine(config, dcp_workload(), nullptr);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->failure, "");
  EXPECT_GT(run->checks, 3);
  EXPECT_EQ(run->finished, 10);
  EXPECT_EQ(run->dcp_world_size, world_size);
  EXPECT_EQ(run->rank_kv_cache_bytes * world_size, run->single_rank_kv_cache_bytes);
  for (const StepRecord& step : run->steps) {
    EXPECT_GT(step.result.dcp_received_bytes, 0.0) << "step " << step.step;
    EXPECT_GT(step.result.single_rank_ms, 0.0) << "step " << step.step;
    EXPECT_FALSE(step.result.cascade);
  }
  StatusOr<EngineRun> again = run_engine(config, dcp_workload(), nullptr);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->steps.size(), run->steps.size());
  for (size_t i = 0; i < run->steps.size(); ++i) {
    EXPECT_EQ(again->steps[i].digest, run->steps[i].digest) << "step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, ServeDcpRun,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(DcpCommBackend::kAgRs,
                                                              DcpCommBackend::kA2a)));

}  // namespace
}  // namespace pagedattn::serve
