// One backend through a whole workload: requests arrive on their step, the scheduler makes each
// step's batch, the executor runs it, and every `check_every` steps the oracle checks one layer of
// a few sampled requests. What a run measured is kept per step for the report.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "serve/dcp_executor.h"
#include "serve/executor.h"
#include "serve/scheduler.h"
#include "serve/workload.h"

namespace pagedattn::serve {

struct EngineConfig {
  ExecutorConfig executor;
  DcpConfig dcp;  // world_size > 1: N simulated DCP ranks beside N = 1 (DcpExecutor)
  SchedulerConfig scheduler;
  bool prefix_caching = true;
  int check_every = 8;     // steps between oracle checks (0 = never)
  int check_requests = 2;  // requests sampled per check
  int check_rows = 8;      // last query rows of each sampled request
  int max_steps = 100000;
  bool digest = false;  // hash every step's outputs (reproducibility)
};

struct StepRecord {
  int step = 0;
  int num_reqs = 0;
  int num_tokens = 0;
  int num_prefill_tokens = 0;  // tokens of requests scheduling more than one
  bool decode_only = false;
  StepResult result;
  double kv_usage = 0.0;  // share of the cache's blocks in use after scheduling
  int preempted = 0;
  uint64_t digest = 0;
};

struct EngineRun {
  std::string backend;  // the executor's label
  std::string device;
  std::vector<StepRecord> steps;
  int finished = 0;
  int preemptions = 0;
  int checks = 0;  // oracle checks run (each a layer of a few requests)
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;
  std::string failure;  // the oracle mismatch that stopped the run, if any
  std::string note;     // e.g. why CUDA graphs were turned off
  // Under DCP: the ranks, their combine path, and the KV cache of one rank and of N = 1.
  int dcp_world_size = 1;
  std::string dcp_comm;
  int64_t rank_kv_cache_bytes = 0, single_rank_kv_cache_bytes = 0;
};

// Reports progress after each step (steps done, requests finished of total, running, KV usage).
using ProgressFn = std::function<void(int step, int finished, int total, int running, double kv)>;

StatusOr<EngineRun> run_engine(const EngineConfig& config, const Workload& workload,
                               const ProgressFn& progress);

}  // namespace pagedattn::serve
