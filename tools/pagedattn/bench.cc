// `pagedattn bench`: time standard suites through a backend after warm-up (median of repeats) and
// report GFLOP/s and KV GB/s beside ceilings measured in the same run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench_suites.h"
#include "commands.h"
#include "common.h"
#include "pagedattn/config.h"
#include "probes.h"
#include "runner.h"

namespace pagedattn::cli {
namespace {

struct BenchOptions {
  std::string suite = "all";
  std::string backend = "auto";
  std::string json_file;
  int repeats = 5;
  int warmup = 1;
  bool quick = false;
  int kernel_generation = 0;
};

struct Row {
  std::string name, backend;
  CaseWork work;
  std::vector<double> times_ms;
  double median_ms = 0.0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One decimal for small rates (CPU), none for large ones (GPU).
std::string rate(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), x >= 1000.0 ? "%.0f" : "%.1f", x);
  return text;
}

// "42%", or "-" when the ceiling could not be measured.
std::string percent(double value, double ceiling) {
  if (ceiling <= 0.0) return "-";
  char text[16];
  std::snprintf(text, sizeof(text), "%.0f%%", 100.0 * value / ceiling);
  return text;
}

// Prints one result row (as soon as it is measured, so a long run shows its table as it goes)
// and returns it as JSON.
nlohmann::json report_row(const Row& r, const Ceiling& bandwidth, const Ceiling& compute) {
  const double seconds = r.median_ms * 1e-3;
  const double gflops = r.work.flops / seconds / 1e9, gbps = r.work.kv_bytes / seconds / 1e9;
  std::printf("%-30s %-24s %7lld %10.3f %10s %6s %9.1f %6s\n", r.name.c_str(), r.backend.c_str(),
              static_cast<long long>(r.work.tokens), r.median_ms, rate(gflops).c_str(),
              percent(gflops, compute.value).c_str(), gbps, percent(gbps, bandwidth.value).c_str());
  std::fflush(stdout);
  return {{"case", r.name},
          {"backend", r.backend},
          {"tokens", r.work.tokens},
          {"flops", r.work.flops},
          {"kv_bytes", r.work.kv_bytes},
          {"median_ms", r.median_ms},
          {"times_ms", r.times_ms},
          {"gflops", gflops},
          {"kv_gbps", gbps},
          {"fraction_of_compute", compute.value > 0 ? gflops / compute.value : 0.0},
          {"fraction_of_bandwidth", bandwidth.value > 0 ? gbps / bandwidth.value : 0.0}};
}

int run_bench(const BenchOptions& o) {
  const Device device = device_for_backend(o.backend);
  const std::vector<testing::CaseSpec> cases = bench_suite(o.suite, device.kind, o.quick);
  std::cerr << "bench: measuring ceilings on " << device_name(device) << "...\n";
  Ceiling bandwidth, compute;
  if (device.is_cpu()) {
    bandwidth = measure_host_read_bandwidth(o.quick);
    compute = measure_host_matmul_rate(o.quick);
  } else {
#if PAGEDATTN_WITH_CUDA
    bandwidth = measure_cuda_read_bandwidth(device.index, o.quick);
    compute = cuda_matmul_ceiling(device.index);
#endif
  }

  std::printf("device: %s\n", device_name(device).c_str());
  std::printf("ceilings: read bandwidth %.1f GB/s (%s)\n", bandwidth.value,
              bandwidth.method.c_str());
  std::printf("          compute %.1f GFLOP/s (%s)\n", compute.value, compute.method.c_str());
  std::printf("%-30s %-24s %7s %10s %10s %6s %9s %6s\n", "case", "backend", "tokens", "median ms",
              "GFLOP/s", "%peak", "KV GB/s", "%bw");
  std::fflush(stdout);
  nlohmann::json results = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    const testing::CaseSpec& spec = cases[i];
    std::cerr << "bench: [" << i + 1 << "/" << cases.size() << "] " << spec.name
              << ": preparing the batch...\n";
    testing::StepOptions options;
    options.kernel_generation = o.kernel_generation;
    StatusOr<std::unique_ptr<StepRunner>> prepared = prepare_case(spec, o.backend, options);
    if (!prepared.ok()) return bad_input(spec.name + ": " + prepared.status().message());
    StepRunner& run = **prepared;
    if (Status s = run.run_step(); !s.ok()) {
      std::cerr << "pagedattn: " << spec.name << ": " << s.to_string() << "\n";
      return kExitFailed;
    }
    std::cerr << "bench: [" << i + 1 << "/" << cases.size() << "] " << spec.name << ": timing "
              << o.repeats << " runs on " << run.backend_label() << "...\n";
    StatusOr<std::vector<double>> times =
        run.placement().time_ms([&run] { return run.forward(false); }, o.warmup, o.repeats);
    if (!times.ok()) {
      std::cerr << "pagedattn: " << spec.name << ": " << times.status().to_string() << "\n";
      return kExitFailed;
    }
    results.push_back(report_row(
        {spec.name, run.backend_label(), case_work(run.spec()), *times, median(*times)}, bandwidth,
        compute));
  }

  if (!o.json_file.empty()) {
    nlohmann::json doc = {{"version", PAGEDATTN_VERSION},
                          {"device", device_name(device)},
                          {"suite", o.suite},
                          {"quick", o.quick},
                          {"repeats", o.repeats},
                          {"warmup", o.warmup},
                          {"ceilings",
                           {{"read_bandwidth_gbps", bandwidth.value},
                            {"read_bandwidth_method", bandwidth.method},
                            {"compute_gflops", compute.value},
                            {"compute_method", compute.method}}},
                          {"results", results}};
    std::ofstream out(o.json_file);
    if (!out) return bad_input("--json: cannot write '" + o.json_file + "'");
    out << doc.dump(1) << "\n";
    std::cerr << "bench: wrote " << o.json_file << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time the standard suites (median after warm-up) with GFLOP/s and KV GB/s beside "
      "the read-bandwidth and compute ceilings measured in the same run");
  cmd->add_option("--suite", o->suite, "decode, prefill, mixed, cascade, fp8, spec-verify or all")
      ->capture_default_str()
      ->check(
          CLI::IsMember(std::vector<std::string>(std::begin(kSuiteNames), std::end(kSuiteNames))));
  cmd->add_option("--backend", o->backend,
                  "auto (the selector's choice), cpu, flash_attn, flashinfer")
      ->capture_default_str()
      ->check(backend_validator(true));
  cmd->add_option("--json", o->json_file, "Also write the results as JSON to this file");
  cmd->add_option("--repeats", o->repeats, "Timed runs per case (the median is reported)")
      ->capture_default_str()
      ->check(integer_in_range(1, 100000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs before timing")
      ->capture_default_str()
      ->check(integer_in_range(0, 100000));
  add_generation_option(*cmd, o->kernel_generation);
  cmd->add_flag("--quick", o->quick, "Smaller cases and shorter probes (CI)");
  cmd->callback([o, &exit_code] { exit_code = run_bench(*o); });
}

}  // namespace pagedattn::cli
