// `pagedattn serve`, the main job: an engine-shaped workload (requests arriving, continuous
// batching with chunked prefill, prefix caching, preemption, CUDA graphs on decode steps) through
// one or more backends, checked against the float64 oracle as it runs, reported as a table, an
// SVG plot and JSON (in serve-out/ by default). The loop itself lives in tools/serve/.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "pagedattn/dcp_combine.h"
#include "pagedattn/device_info.h"
#include "probes.h"
#include "serve/dcp_report.h"
#include "serve/engine.h"
#include "serve/output_path.h"
#include "serve/plot.h"
#include "serve/progress.h"
#include "serve/report.h"

namespace pagedattn::cli {
namespace {

struct ServeOptions {
  std::string backend = "auto";
  std::string preset = "tiny";
  int num_layers = 0;  // 0 = the preset's
  std::string kv_cache_dtype = "auto";
  int num_blocks = 0;  // 0 = 512, or one max_model_len request if that needs more
  int max_num_seqs = 32;
  int max_num_batched_tokens = 1024;
  serve::WorkloadConfig workload;
  std::string trace;
  bool no_prefix_caching = false;
  bool no_cuda_graphs = false;
  bool no_ceiling = false;
  int check_every = 8;
  int check_requests = 2;
  int progress_every = 50;
  std::string json = std::string(serve::kOutputDir) + "/serve.json";
  std::string plot = std::string(serve::kOutputDir) + "/serve.svg";
  int dcp = 1;
  std::string dcp_comm = "ag_rs";
};

// Why `b` cannot run on this machine at all, in serve's terms: not built, or no device of its kind.
// Said alone, since the library's device reasons then speak of select's --compute-capability.
std::optional<std::string> cannot_run_here(const AttentionBackend& b) {
  if (std::optional<std::string> why = b.unavailable_reason()) return why;
  if (!b.supports_device(DeviceKind::kCPU) && cuda_devices().empty())
    return "no CUDA device on this machine";
  return std::nullopt;
}

// The backends to run: "auto" (the selector's choice on the best device), "all" (every backend
// that can serve the model on a device this machine has) or a comma-separated list of names.
StatusOr<std::vector<std::string>> backends_to_run(const ServeOptions& o,
                                                   const serve::ModelShape& m) {
  if (o.backend == "auto") return std::vector<std::string>{"auto"};
  std::vector<std::string> names;
  if (o.backend == "all") {
    for (const AttentionBackend* b : registered_backends()) {
      std::vector<std::string> reasons;
      if (std::optional<std::string> why = cannot_run_here(*b)) {
        reasons.push_back(*why);
      } else {
        const bool cpu = b->supports_device(DeviceKind::kCPU);
        reasons = b->validate_configuration(
            serve::selector_config_for(m, cpu ? Device::cpu() : Device::cuda(0)));
      }
      if (reasons.empty()) {
        names.emplace_back(b->name());
        continue;
      }
      std::string why;
      for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
      std::cout << "skipping " << b->name() << ": " << why << "\n";
    }
    if (names.empty())
      return invalid_argument("--backend all: no backend here can serve " + m.name);
    return names;
  }
  std::stringstream in(o.backend);
  for (std::string name; std::getline(in, name, ',');) {
    const AttentionBackend* b = find_backend(name);
    if (b == nullptr) {
      return invalid_argument(
          "--backend: unknown backend '" + name +
          "'; allowed: auto, all, or names among CPU_ATTN, FLASH_ATTN, FLASHINFER");
    }
    if (std::optional<std::string> why = cannot_run_here(*b))
      return invalid_argument("--backend: '" + name + "' cannot run on this machine: " + *why);
    names.push_back(name);
  }
  return names;
}

// Under --dcp the engine's simulated ranks run CPU_ATTN in this process ("auto" and "all" mean
// it); FLASH_ATTN and FLASHINFER serve DCP through the API with a device group (docs/dcp.md).
StatusOr<std::vector<std::string>> dcp_backends_to_run(const ServeOptions& o,
                                                       const serve::ModelShape& m) {
  if (o.backend == "auto" || o.backend == "all") return std::vector<std::string>{"CPU_ATTN"};
  std::stringstream in(o.backend);
  for (std::string name; std::getline(in, name, ',');) {
    const AttentionBackend* b = find_backend(name);
    if (b != nullptr && b->name() != "CPU_ATTN") {
      return invalid_argument("--dcp " + std::to_string(o.dcp) + ": serve's ranks run CPU_ATTN in " +
                              "one process, not " + std::string(b->name()) +
                              " (--backend cpu; the GPU backends serve DCP through the API with a " +
                              "device group, docs/dcp.md)");
    }
  }
  return backends_to_run(o, m);
}

nlohmann::json config_json(const ServeOptions& o, const serve::EngineConfig& e,
                           const serve::Workload& w) {
  const serve::ModelShape& m = e.executor.model;
  return {{"model",
           {{"name", m.name},
            {"num_layers", m.num_layers},
            {"num_heads", m.num_heads},
            {"num_kv_heads", m.num_kv_heads},
            {"head_size", m.head_size},
            {"dtype", dtype_name(m.dtype)},
            {"kv_cache_dtype", kv_cache_dtype_name(m.kv_cache_dtype)},
            {"block_size", m.block_size},
            {"max_model_len", m.max_model_len},
            {"sliding_window", m.sliding_window},
            {"sinks", m.sinks}}},
          {"workload", w.description},
          {"num_blocks", e.executor.num_blocks},
          {"max_num_seqs", e.scheduler.max_num_seqs},
          {"max_num_batched_tokens", e.scheduler.max_num_batched_tokens},
          {"prefix_caching", e.prefix_caching},
          {"cuda_graphs", e.executor.cuda_graphs},
          {"check_every", e.check_every},
          {"seed", o.workload.seed}};
}

int run_serve(const ServeOptions& o) {
  for (const Status& s : {serve::check_output_file("--plot", o.plot, ".svg"),
                          serve::check_output_file("--json", o.json, "")}) {
    if (!s.ok()) return bad_input(s);
  }
  StatusOr<serve::ModelShape> preset = serve::model_preset(o.preset);
  if (!preset.ok()) return bad_input(preset.status());
  serve::ModelShape model = *preset;
  if (o.num_layers > 0) model.num_layers = o.num_layers;
  model.kv_cache_dtype = *parse_kv_cache_dtype(o.kv_cache_dtype);

  StatusOr<serve::Workload> workload =
      o.trace.empty() ? serve::generate_workload(o.workload, model.max_model_len)
                      : serve::load_trace(o.trace, model.max_model_len);
  if (!workload.ok()) return bad_input(workload.status());
  StatusOr<std::vector<std::string>> backends =
      o.dcp > 1 ? dcp_backends_to_run(o, model) : backends_to_run(o, model);
  if (!backends.ok()) return bad_input(backends.status());
  StatusOr<DcpCommBackend> dcp_comm = parse_dcp_comm_backend(o.dcp_comm);
  if (!dcp_comm.ok()) return bad_input("--dcp-comm: " + dcp_comm.status().message());

  serve::EngineConfig config;
  config.executor.model = model;
  const int one_request = (model.max_model_len + model.block_size - 1) / model.block_size + 1;
  config.executor.num_blocks = o.num_blocks > 0 ? o.num_blocks : std::max(512, one_request);
  // Under DCP an engine block holds block_size * N tokens: the same tokens in 1/N of the blocks.
  config.executor.num_blocks = (config.executor.num_blocks + o.dcp - 1) / o.dcp;
  config.executor.max_num_seqs = o.max_num_seqs;
  config.executor.max_num_batched_tokens = o.max_num_batched_tokens;
  config.executor.cuda_graphs = !o.no_cuda_graphs;
  config.executor.seed = o.workload.seed;
  config.scheduler = {o.max_num_seqs, o.max_num_batched_tokens};
  config.prefix_caching = !o.no_prefix_caching;
  config.check_every = o.check_every;
  config.check_requests = o.check_requests;
  config.dcp = {o.dcp, *dcp_comm};

  std::cout << "pagedattn serve: " << model.describe() << "\n"
            << "workload: " << workload->description << "\n"
            << "engine: " << config.executor.num_blocks << " KV blocks per layer, max_num_seqs "
            << o.max_num_seqs << ", max_num_batched_tokens " << o.max_num_batched_tokens
            << ", prefix caching " << (config.prefix_caching ? "on" : "off") << ", CUDA graphs "
            << (config.executor.cuda_graphs ? "on" : "off") << ", oracle every " << o.check_every
            << " steps\n";
  if (o.dcp > 1) {
    std::cout << "dcp: " << o.dcp << " ranks as threads of this process (in-process communicator), "
              << o.dcp_comm << " combine, " << model.block_size
              << " tokens per rank in each engine block; N = 1 runs every step too\n";
  }
  std::cout << std::flush;

  std::vector<serve::EngineRun> runs;
  std::vector<serve::Summary> summaries;
  std::map<std::string, Ceiling> ceilings;  // one probe per device, the one bench uses
  nlohmann::json report = config_json(o, config, *workload);
  int exit_code = kExitOk;
  std::string dcp_tables;
  for (const std::string& name : *backends) {
    config.executor.backend = name;
    serve::Progress progress(name == "auto" ? "serve" : name, serve::Progress::stderr_is_terminal(),
                             o.progress_every);
    StatusOr<serve::EngineRun> run = serve::run_engine(
        config, *workload, [&](int step, int finished, int total, int running, double kv) {
          progress.update(step, finished, total, running, kv);
        });
    progress.done();
    if (!run.ok()) {  // say why and go on with the other backends
      std::cout << name << ": error: " << run.status().message() << "\n";
      exit_code = kExitBadInput;
      continue;
    }
    if (!o.no_ceiling && !ceilings.count(run->device))
      ceilings[run->device] = measure_read_ceiling(device_for_backend(name));
    const Ceiling ceiling = o.no_ceiling ? Ceiling{} : ceilings[run->device];
    summaries.push_back(serve::summarize(*run, {ceiling.value, ceiling.method}));
    nlohmann::json entry = serve::summary_json(summaries.back());
    entry["per_step"] = serve::steps_json(*run);
    if (run->dcp_world_size > 1) {
      const serve::DcpSummary dcp = serve::summarize_dcp(*run);
      dcp_tables += "\n" + run->backend + " beside N = 1:\n" + serve::format_dcp_table(dcp);
      entry["dcp"] = serve::dcp_json(dcp);
    }
    report["backends"].push_back(entry);
    if (!run->note.empty()) std::cout << run->backend << ": " << run->note << "\n";
    if (!run->failure.empty()) {
      std::cout << run->backend << ": oracle check FAILED at " << run->failure << "\n";
      if (exit_code == kExitOk) exit_code = kExitFailed;
    }
    runs.push_back(std::move(run).value());
  }
  if (runs.empty()) return exit_code;
  std::cout << "\n" << serve::format_table(summaries) << dcp_tables;
  for (const auto& [device, ceiling] : ceilings)
    std::cout << "read ceiling of " << device << ": " << describe_ceiling(ceiling, "GB/s") << "\n";
  if (!o.plot.empty()) {
    const Status s =
        serve::write_step_time_plot(o.plot, runs, "attention time per step, " + model.name);
    if (!s.ok()) return bad_input(s);
    std::cout << "plot: " << o.plot << "\n";
  }
  if (!o.json.empty()) {
    std::ofstream file(o.json);
    file << report.dump(1) << "\n";
    if (!file) return bad_input("--json: cannot write '" + o.json + "'");
    std::cout << "json: " << o.json << "\n";
  }
  std::cout << (exit_code == kExitOk       ? "every oracle check passed\n"
                : exit_code == kExitFailed ? "an oracle check failed\n"
                                           : "a backend could not run\n");
  return exit_code;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Run an engine-shaped workload (continuous batching, chunked prefill, prefix caching, "
      "preemption, CUDA graphs on decode steps) through the backends, checked by the float64 "
      "oracle; report per-backend figures, a plot and JSON");
  std::string presets;
  for (const std::string& p : serve::model_preset_names())
    presets += (presets.empty() ? "" : ", ") + p;
  cmd->add_option("--backend", o->backend,
                  "auto, all, or a comma-separated list (cpu,flash_attn,flashinfer)")
      ->capture_default_str();
  cmd->add_option("--preset", o->preset, "Model attention shape: " + presets)
      ->capture_default_str();
  cmd->add_option("--num-layers", o->num_layers, "Layers to run (default: the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "KV-cache dtype")
      ->capture_default_str()
      ->check(kv_cache_dtype_validator());
  cmd->add_option("--num-blocks", o->num_blocks,
                  "KV-cache blocks per layer, block 0 the null block (default: 512, or what one "
                  "request of max_model_len needs)")
      ->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Most requests running at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Token budget of a step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--requests", o->workload.num_requests, "Requests to generate")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--rate", o->workload.arrival_rate,
                  "Mean arrivals per step (Poisson); 0 = all at once")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-lens", o->workload.prompt_lens, "N, uniform:LO:HI or exp:MEAN")
      ->capture_default_str();
  cmd->add_option("--output-lens", o->workload.output_lens, "N, uniform:LO:HI or exp:MEAN")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-len", o->workload.shared_prefix_len,
                  "Tokens of the shared system prompt")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shared-prefix-share", o->workload.shared_prefix_share,
                  "Share of requests that start with it")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--trace", o->trace,
                  "JSON trace of requests instead of generating them (docs/serve.md)");
  cmd->add_option("--seed", o->workload.seed, "Seed of the workload and of every tensor")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Turn prefix caching off");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs, "Run decode steps eagerly");
  cmd->add_flag("--no-ceiling", o->no_ceiling, "Skip the read-bandwidth probe");
  cmd->add_option("--check-every", o->check_every, "Steps between oracle checks (0 = never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--check-requests", o->check_requests, "Requests sampled per check")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--progress-every", o->progress_every,
                  "Steps between progress lines when stderr is no terminal")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dcp", o->dcp,
                  "Decode context parallelism: N ranks as threads on CPU_ATTN, each holding 1/N of "
                  "the KV cache, run beside N = 1 (docs/dcp.md)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--dcp-comm", o->dcp_comm, "How the DCP ranks combine: ag_rs or a2a")
      ->capture_default_str();
  cmd->add_option("--plot", o->plot,
                  "SVG of the step times by step kind (a .svg file name; '' = none)")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "The figures and every step as JSON ('' = none)")
      ->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run_serve(*o); });
}

}  // namespace pagedattn::cli
