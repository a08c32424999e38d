// run_engine: the engine's main loop (vLLM v1's EngineCore.step: schedule, execute, update).
#include "serve/engine.h"

#include <memory>
#include <random>

#include "pagedattn/dcp_combine.h"
#include "serve/step_batch.h"

namespace pagedattn::serve {
namespace {

std::vector<int> sample_positions(const StepBatch& b, int count, std::mt19937_64& rng) {
  std::vector<int> all(b.num_reqs);
  for (int i = 0; i < b.num_reqs; ++i) all[i] = i;
  std::vector<int> picked;
  for (int k = 0; k < count && !all.empty(); ++k) {
    const size_t j = rng() % all.size();
    picked.push_back(all[j]);
    all.erase(all.begin() + static_cast<long>(j));
  }
  return picked;
}

// The plain executor, or DCP's with its figures recorded in `run`.
StatusOr<std::unique_ptr<StepExecutor>> make_executor(const EngineConfig& config, EngineRun& run) {
  if (config.dcp.world_size == 1) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<Executor> plain, Executor::create(config.executor));
    return std::unique_ptr<StepExecutor>(std::move(plain));
  }
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<DcpExecutor> dcp,
                             DcpExecutor::create(config.executor, config.dcp));
  run.dcp_world_size = config.dcp.world_size;
  run.dcp_comm = dcp_comm_backend_name(config.dcp.comm_backend);
  run.rank_kv_cache_bytes = dcp->rank_kv_cache_bytes();
  run.single_rank_kv_cache_bytes = dcp->single_rank_kv_cache_bytes();
  return std::unique_ptr<StepExecutor>(std::move(dcp));
}

}  // namespace

StatusOr<EngineRun> run_engine(const EngineConfig& config, const Workload& workload,
                               const ProgressFn& progress) {
  EngineRun run;
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<StepExecutor> executor, make_executor(config, run));
  const ModelShape& model = config.executor.model;
  // Under DCP an engine block holds block_size tokens on each of the N ranks.
  const int block_size = model.block_size * config.dcp.world_size;
  const int per_request_blocks = (model.max_model_len + block_size - 1) / block_size;
  if (config.executor.num_blocks - 1 < per_request_blocks) {
    return invalid_argument(
        "num_blocks = " + std::to_string(config.executor.num_blocks) +
        " cannot hold one request of max_model_len = " + std::to_string(model.max_model_len) +
        " (needs " + std::to_string(per_request_blocks + 1) + " with the null block)");
  }
  BlockPool pool(config.executor.num_blocks, config.prefix_caching);
  KVCacheManager kv(pool, block_size);
  Scheduler scheduler(config.scheduler, kv);

  std::vector<std::unique_ptr<Request>> requests;
  for (const RequestSpec& spec : workload.requests) {
    auto r = std::make_unique<Request>();
    r->id = spec.id;
    r->arrival_step = spec.arrival_step;
    r->tokens = prompt_tokens(spec, workload.shared_prefix_len, config.executor.seed);
    r->num_prompt_tokens = spec.prompt_len;
    r->max_output_tokens = spec.output_len;
    requests.push_back(std::move(r));
  }
  const uint64_t seed = config.executor.seed;
  auto token_of = [seed](const Request& r, int position) {
    return sampled_token(seed, r.id, position);
  };

  run.device = device_name(executor->device());
  std::mt19937_64 check_rng(seed ^ 0xC4ECull);
  size_t next_arrival = 0;
  const int total = static_cast<int>(requests.size());
  for (int step = 0; step < config.max_steps; ++step) {
    while (next_arrival < requests.size() && requests[next_arrival]->arrival_step <= step) {
      scheduler.add_request(requests[next_arrival++].get());
    }
    if (!scheduler.has_unfinished()) {
      if (next_arrival == requests.size()) break;
      step = requests[next_arrival]->arrival_step - 1;  // idle until the next arrival
      continue;
    }
    const SchedulerOutput out = scheduler.schedule();
    run.preemptions += static_cast<int>(out.preempted.size());
    if (out.work.empty())
      return internal_error("step " + std::to_string(step) + ": nothing scheduled");
    const StepBatch batch =
        make_step_batch(out, block_size, executor->table_width(), executor->reorder_threshold());
    StepRecord rec;
    rec.step = step;
    rec.num_reqs = batch.num_reqs;
    rec.num_tokens = batch.num_tokens;
    for (int q : batch.query_lens) rec.num_prefill_tokens += q > 1 ? q : 0;
    rec.decode_only = batch.decode_only;
    rec.kv_usage = pool.usage();
    rec.preempted = static_cast<int>(out.preempted.size());
    StatusOr<StepResult> result = executor->run_step(batch);
    if (!result.ok()) {
      return Status(result.status().code(),
                    "step " + std::to_string(step) + ": " + result.status().message());
    }
    rec.result = *result;
    if (config.digest) {
      PAGEDATTN_ASSIGN_OR_RETURN(rec.digest, executor->output_digest(batch));
    }
    if (config.check_every > 0 && step % config.check_every == 0) {
      const int layer = run.checks % model.num_layers;
      const std::vector<int> positions = sample_positions(batch, config.check_requests, check_rng);
      PAGEDATTN_ASSIGN_OR_RETURN(const std::vector<std::string> failures,
                                 executor->check(batch, layer, positions, config.check_rows));
      ++run.checks;
      if (!failures.empty()) {
        run.failure = "step " + std::to_string(step) + ": " + failures.front();
        run.steps.push_back(rec);
        break;
      }
    }
    run.steps.push_back(rec);
    run.finished += static_cast<int>(scheduler.update(out, token_of).size());
    if (progress) progress(step, run.finished, total, scheduler.num_running(), pool.usage());
  }
  run.backend = executor->label();  // after the steps: the kernels they ran
  run.note = executor->graph_error();
  run.prefix_query_tokens = kv.prefix_query_tokens();
  run.prefix_hit_tokens = kv.prefix_hit_tokens();
  return run;
}

}  // namespace pagedattn::serve
