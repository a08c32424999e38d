// The serve loop end to end on the CPU backend: a seeded run is reproducible bit for bit (the same
// schedule and the same output bytes at every step), another seed is not, the oracle checks run
// and pass, and preemption and prefix hits happen in the workload below (no cascade: CPU_ATTN
// declines a shared prefix that fits the last-level cache). Also the workload parsers.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "serve/engine.h"
#include "serve/workload.h"

namespace pagedattn::serve {
namespace {

EngineConfig small_engine(uint64_t seed) {
  EngineConfig c;
  c.executor.model = *model_preset("tiny");
  c.executor.model.num_layers = 2;
  c.executor.model.num_heads = 4;
  c.executor.model.num_kv_heads = 2;
  c.executor.model.head_size = 64;
  c.executor.model.max_model_len = 1024;
  c.executor.backend = "cpu";
  c.executor.num_blocks = 70;  // tight: 12 running requests of ~350 tokens preempt
  c.executor.max_num_seqs = 12;
  c.executor.max_num_batched_tokens = 160;
  c.executor.seed = seed;
  c.scheduler = {12, 160};
  c.check_every = 5;
  c.check_requests = 2;
  c.digest = true;
  return c;
}

Workload small_workload(uint64_t seed) {
  WorkloadConfig w;
  w.num_requests = 20;
  w.arrival_rate = 2.0;
  w.prompt_lens = "uniform:20:200";
  w.output_lens = "uniform:4:24";
  w.shared_prefix_len = 256;
  w.shared_prefix_share = 1.0;
  w.seed = seed;
  return *generate_workload(w, 1024);
}

TEST(ServeEngine, SeededCpuRunIsReproducibleBitForBit) {
  const StatusOr<EngineRun> first = run_engine(small_engine(5), small_workload(5), nullptr);
  const StatusOr<EngineRun> second = run_engine(small_engine(5), small_workload(5), nullptr);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(first->failure, "");
  EXPECT_EQ(first->finished, 20);
  EXPECT_GT(first->checks, 3);
  EXPECT_GT(first->preemptions, 0);
  EXPECT_GT(first->prefix_hit_tokens, 0);
  ASSERT_EQ(first->steps.size(), second->steps.size());
  for (size_t i = 0; i < first->steps.size(); ++i) {
    const StepRecord &a = first->steps[i], &b = second->steps[i];
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.num_reqs, b.num_reqs);
    EXPECT_EQ(a.num_tokens, b.num_tokens);
    EXPECT_EQ(a.result.cascade, b.result.cascade);
    EXPECT_EQ(a.digest, b.digest) << "step " << a.step;
  }

  const StatusOr<EngineRun> other = run_engine(small_engine(6), small_workload(6), nullptr);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_NE(other->steps[0].digest, first->steps[0].digest);
}

TEST(ServeEngine, RefusesACacheThatCannotHoldOneRequest) {
  EngineConfig c = small_engine(1);
  c.executor.num_blocks = 16;  // 1024 tokens need 64 blocks
  const StatusOr<EngineRun> run = run_engine(c, small_workload(1), nullptr);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("num_blocks = 16"), std::string::npos);
}

TEST(ServeWorkload, DistributionsAndTraces) {
  EXPECT_TRUE(LengthDistribution::parse("128", "p").ok());
  EXPECT_TRUE(LengthDistribution::parse("uniform:4:9", "p").ok());
  EXPECT_TRUE(LengthDistribution::parse("exp:50", "p").ok());
  for (const char* bad : {"", "0", "uniform:9:4", "uniform:4", "normal:3:1", "exp:x"}) {
    const auto d = LengthDistribution::parse(bad, "prompt_lens");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("prompt_lens"), std::string::npos);
  }
  std::mt19937_64 rng(3);
  const LengthDistribution u = *LengthDistribution::parse("uniform:4:9", "p");
  for (int i = 0; i < 200; ++i) {
    const int n = u.sample(rng);
    EXPECT_TRUE(n >= 4 && n <= 9) << n;
  }

  const std::string path = ::testing::TempDir() + "/serve_trace.json";
  std::ofstream(path) << R"({"shared_prefix_len": 32, "requests": [
      {"arrival": 3, "prompt_len": 40, "output_len": 5, "shared_prefix": true},
      {"arrival": 1, "prompt_len": 900, "output_len": 500}]})";
  const StatusOr<Workload> w = load_trace(path, 1024);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(w->requests.size(), 2u);
  EXPECT_EQ(w->requests[0].arrival_step, 1);  // sorted by arrival
  EXPECT_EQ(w->requests[0].output_len, 124);  // clamped to max_model_len
  const std::vector<int32_t> p0 = prompt_tokens(w->requests[1], 32, 9);
  RequestSpec twin = w->requests[1];
  twin.id = 77;
  const std::vector<int32_t> p1 = prompt_tokens(twin, 32, 9);
  EXPECT_EQ(std::vector<int32_t>(p0.begin(), p0.begin() + 32),
            std::vector<int32_t>(p1.begin(), p1.begin() + 32));
  EXPECT_NE(p0[32], p1[32]);

  std::ofstream(path) << R"({"requests": [{"arrival": 0, "prompt": 3}]})";
  const StatusOr<Workload> bad = load_trace(path, 1024);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'prompt'"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pagedattn::serve
