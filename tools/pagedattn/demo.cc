// `pagedattn demo`, the README's main job: a representative sequence of serving steps through the
// backend the selector picks on the best device present, each verified against the float64 oracle.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "bench_suites.h"
#include "commands.h"
#include "common.h"
#include "runner.h"

namespace pagedattn::cli {
namespace {

struct DemoOptions {
  std::string backend = "auto";
  int repeats = 3;
};

struct Step {
  const char* what;
  testing::CaseSpec spec;
};

testing::CaseSpec step_case(const std::string& name, std::vector<int> seq_lens,
                            std::vector<int> query_lens) {
  testing::CaseSpec s;  // a Llama-3-8B-like layer: 32 query heads, 8 KV heads, head size 128, bf16
  s.name = name;
  s.seed = 2024;
  s.seq_lens = std::move(seq_lens);
  s.query_lens = std::move(query_lens);
  return s;
}

// Sized so that the float64 oracle that checks each step stays within seconds on a small CPU.
std::vector<Step> demo_steps() {
  std::vector<Step> steps;
  steps.push_back({"two new prompts (prefill)", step_case("prefill", {256, 384}, {256, 384})});

  std::vector<int> seq, q;
  for (int r = 0; r < 16; ++r) {
    seq.push_back(256 + 97 * r);
    q.push_back(1);
  }
  seq.push_back(768);  // a long prompt's second chunk: 256 new tokens after 512 cached
  q.push_back(256);
  steps.push_back({"16 decodes + a chunked-prefill chunk", step_case("mixed", seq, q)});

  steps.push_back({"32 decodes at 1024 tokens",
                   step_case("decode", std::vector<int>(32, 1024), std::vector<int>(32, 1))});

  testing::CaseSpec shared = step_case("shared_prefix", {}, {});
  for (int r = 0; r < 16; ++r) {
    shared.seq_lens.push_back(512 + 40 + 13 * r);
    shared.query_lens.push_back(r % 4 == 0 ? 8 : 1);
  }
  shared.common_prefix_len = 512;  // a 512-token system prompt in blocks all requests share
  steps.push_back({"16 requests sharing a 512-token prompt", shared});

  testing::CaseSpec fp8 = step_case("fp8_kv_cache", seq, q);
  fp8.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  fp8.kv_scale_per_head = true;
  steps.push_back({"mixed step, FP8 e4m3 KV cache", fp8});

  testing::CaseSpec window = step_case("window_sinks", {1500, 700, 300, 130}, {1, 1, 1, 130});
  window.num_heads = 64;
  window.num_kv_heads = 8;
  window.head_size = 64;
  window.sliding_window = SlidingWindow{127, 0};
  window.sinks = true;
  steps.push_back({"gpt-oss style: window 128 + sinks", window});
  return steps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int run_demo(const DemoOptions& o) {
  const std::vector<Step> steps = demo_steps();
  const Device device = device_for_backend(o.backend);
  std::printf("pagedattn demo: %zu serving steps on %s, each checked against the float64 oracle\n",
              steps.size(), device_name(device).c_str());
  std::printf("%-14s %-40s %-24s %6s %9s %10s %8s %s\n", "step", "what", "backend", "tokens", "ms",
              "tokens/s", "KV GB/s", "result");
  int exit_code = kExitOk;
  for (const Step& step : steps) {
    StatusOr<std::unique_ptr<StepRunner>> prepared = prepare_case(step.spec, o.backend);
    if (!prepared.ok()) {  // e.g. no backend here serves this step's model: say so, go on
      std::printf("%-14s %-40s ERROR: %s\n", step.spec.name.c_str(), step.what,
                  prepared.status().message().c_str());
      exit_code = kExitBadInput;
      continue;
    }
    StepRunner& run = **prepared;
    Status s = run.run_step();
    StatusOr<std::vector<double>> times = std::vector<double>{};
    if (s.ok())
      times = run.placement().time_ms([&run] { return run.forward(false); }, 1, o.repeats);
    if (s.ok() && !times.ok()) s = times.status();
    // The timed runs wrote outputs without LSE; run the step once more for the check.
    if (s.ok()) s = run.run_step();
    StatusOr<reference::Comparison> cmp =
        s.ok() ? run.verify() : StatusOr<reference::Comparison>(s);
    const bool pass = cmp.ok() && cmp->pass;
    if (!pass) exit_code = std::max(exit_code, kExitFailed);
    const CaseWork work = case_work(run.spec());
    const double ms = times.ok() && !times->empty() ? median(*times) : 0.0;
    std::printf("%-14s %-40s %-24s %6lld %9.3f %10.0f %8.1f %s\n", step.spec.name.c_str(),
                step.what, run.backend_label().c_str(), static_cast<long long>(work.tokens), ms,
                ms > 0 ? work.tokens / (ms * 1e-3) : 0.0, ms > 0 ? work.kv_bytes / (ms * 1e6) : 0.0,
                pass ? "PASS" : "FAIL");
    if (!cmp.ok()) std::printf("    %s\n", cmp.status().to_string().c_str());
    if (cmp.ok() && !cmp->pass) std::printf("%s", cmp->detail.c_str());
    std::fflush(stdout);
  }
  std::printf("%s\n", exit_code == kExitOk ? "all steps passed" : "not every step passed");
  return exit_code;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Run representative serving steps (prefill, mixed decode + chunked prefill, shared "
      "prefix, FP8 cache, window + sinks) through the selected backend, verify each");
  cmd->add_option("--backend", o->backend,
                  "auto (the selector's choice), cpu, flash_attn, flashinfer")
      ->capture_default_str()
      ->check(backend_validator(true));
  cmd->add_option("--repeats", o->repeats, "Timed runs per step (median reported)")
      ->capture_default_str()
      ->check(integer_in_range(1, 100000));
  cmd->callback([o, &exit_code] { exit_code = run_demo(*o); });
}

}  // namespace pagedattn::cli
