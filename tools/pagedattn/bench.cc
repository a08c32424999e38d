// `pagedattn bench`: time suites of cases through one or more backends (median after warm-up) and
// report GFLOP/s and KV GB/s beside ceilings measured in the same run; host launch and build()
// costs for the overhead suite.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>

#include <nlohmann/json.hpp>

#include "bench_measure.h"
#include "bench_rows.h"
#include "bench_suites.h"
#include "bench_variants.h"
#include "commands.h"
#include "common.h"
#include "pagedattn/backend.h"
#include "pagedattn/config.h"
#include "probes.h"

namespace pagedattn::cli {
namespace {

// Forward calls for the launch overhead: issued while the device is held (few enough for the
// launch queue), and run freely; build() calls timed.
constexpr int kHeldCalls = 200;
constexpr int kFreeCalls = 2000;
constexpr int kBuildCalls = 200;

struct BenchOptions {
  std::string suite = "all";
  std::string backend = "auto";
  std::string json_file;
  std::string filter;
  std::vector<int> block_sizes;
  int repeats = 5;
  int warmup = 1;
  bool quick = false;
  bool list = false;
  bool deterministic = false;
  bool fp8_tensor_cores = false;
  std::string kv_layout;  // empty: the process default (NHD)
  int kernel_generation = 0;
};

// One K (or V) block of the decode cases at block 16 in bf16: 16 tokens x 8 KV heads x 128.
constexpr int kDecodeCasesBlockBytes = 16 * 8 * 128 * 2;

Ceilings measure_ceilings(const Device& device, bool quick) {
  Ceilings c;
  c.bandwidth = measure_read_ceiling(device);  // never quick: the figure serve uses too
  if (device.is_cpu()) {
    c.compute = measure_host_dot_rate(quick);
    c.paged_read = measure_host_paged_read_bandwidth(kDecodeCasesBlockBytes);
  } else {
#if PAGEDATTN_WITH_CUDA
    c.compute = cuda_matmul_ceiling(device.index);
#endif
  }
  return c;
}

// A row, and whether its error (when it has one) was bad input (the backend cannot serve the
// case) rather than a failure while running.
struct Outcome {
  Row row;
  bool bad_input = false;
};

// One case on one variant: the step once, then what the case measures.
Outcome run_case(const BenchCase& c, const BenchVariant& v, SharedCase& shared,
                 const BenchOptions& o) {
  Outcome out;
  Row& row = out.row;
  row.bench_case = c;
  row.variant = v.backend + ":" + generation_name(v.kernel_generation);
  if (const AttentionBackend* forced = find_backend(v.backend)) row.backend = forced->name();
  StatusOr<std::unique_ptr<testing::StepRunner>> prepared = shared.runner(v);
  if (!prepared.ok()) {
    row.error = prepared.status().message();
    out.bad_input = true;
    return out;
  }
  testing::StepRunner& run = **prepared;
  row.bench_case.spec = run.spec();
  row.backend = std::string(run.backend().name());
  // The step once, as check runs it but without downloading (a large cache takes seconds).
  Status status = run.placement().poison_outputs();
  if (status.ok()) status = run.build();
  if (status.ok()) status = run.update_cache();
  if (status.ok()) status = run.forward(false);
  if (status.ok()) status = run.placement().synchronize();
  if (status.ok()) {
    StatusOr<std::vector<double>> times =
        run.placement().time_ms([&run] { return run.forward(false); }, o.warmup, o.repeats);
    status = times.status();
    if (times.ok()) row.times_ms = *times;
  }
  if (status.ok() && c.measure == Measure::kLaunch) {
    StatusOr<LaunchCost> launch = measure_launch(run, kHeldCalls, kFreeCalls, o.warmup);
    status = launch.status();
    if (launch.ok()) row.launch = *launch;
  }
  if (status.ok() && c.measure == Measure::kBuild) {
    StatusOr<std::vector<double>> build = time_build_us(run, kBuildCalls);
    status = build.status();
    if (build.ok()) row.build_us = *build;
  }
  row.label = run.backend_label();  // after the runs: the generation the backend used
  row.generation = std::string(run.kernel_generation());
  if (!status.ok()) row.error = status.to_string();
  return out;
}

// The JSON document (when --json names a file); false when it cannot be written.
bool write_json(const BenchOptions& o, const Device& device, const Ceilings& ceilings,
                const nlohmann::json& results, const nlohmann::json& ratios) {
  if (o.json_file.empty()) return true;
  const nlohmann::json doc = {{"version", PAGEDATTN_VERSION},
                              {"device", device_name(device)},
                              {"suite", o.suite},
                              {"backend", o.backend},
                              {"quick", o.quick},
                              {"repeats", o.repeats},
                              {"warmup", o.warmup},
                              {"ceilings",
                               {{"read_bandwidth_gbps", ceilings.bandwidth.value},
                                {"read_bandwidth_method", ceilings.bandwidth.method},
                                {"compute_gflops", ceilings.compute.value},
                                {"compute_method", ceilings.compute.method},
                                {"paged_read_gbps", ceilings.paged_read.value},
                                {"paged_read_method", ceilings.paged_read.method}}},
                              {"results", results},
                              {"part_ratios", ratios}};
  std::ofstream out(o.json_file);
  out << doc.dump(1) << "\n";
  return static_cast<bool>(out);
}

// `--list`: the cases and their shapes, one a line, without running them.
int list_cases(const std::vector<BenchCase>& cases) {
  for (const BenchCase& c : cases) {
    const CaseShape shape = case_shape(c.spec);
    std::printf("%s %s B=%d S=%d Hq=%d Hkv=%d D=%d causal=%d block=%d\n", c.spec.name.c_str(),
                shape.kind.c_str(), shape.batch, shape.seq, shape.num_heads, shape.num_kv_heads,
                shape.head_size, c.spec.causal ? 1 : 0, c.spec.block_size);
  }
  return kExitOk;
}

int run_bench(const BenchOptions& o) {
  StatusOr<std::vector<BenchVariant>> variants = parse_variants(o.backend, o.kernel_generation);
  if (!variants.ok()) return bad_input("--backend: " + variants.status().message());
  StatusOr<Device> found = variants_device(*variants);
  if (!found.ok()) return bad_input("--backend: " + found.status().message());
  const Device device = *found;
  if (!o.kv_layout.empty()) {
    StatusOr<KVCacheLayout> layout = parse_kv_cache_layout(o.kv_layout);
    if (!layout.ok()) return bad_input("--kv-layout: " + layout.status().message());
    set_kv_cache_layout(*layout);  // the selector's default for backends that take either
  }
  std::vector<BenchCase> cases = bench_suite(o.suite, device.kind, o.quick, o.block_sizes);
  if (!o.filter.empty()) {
    const std::regex pattern(o.filter);
    std::erase_if(cases,
                  [&](const BenchCase& c) { return !std::regex_search(c.spec.name, pattern); });
    if (cases.empty()) {
      return bad_input("--filter: '" + o.filter + "' matches no case of the " + o.suite + " suite");
    }
  }
  if (o.list) return list_cases(cases);
  const nlohmann::json none = nlohmann::json::array();
  if (!write_json(o, device, Ceilings{}, none, none)) {  // before minutes of work, not after
    return bad_input("--json: cannot write '" + o.json_file + "'");
  }
  std::cerr << "bench: measuring ceilings on " << device_name(device) << "...\n";
  const Ceilings ceilings = measure_ceilings(device, o.quick);
  print_header(device_name(device), ceilings);

  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](size_t i, const std::string& what) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "bench: %6.1f s [%zu/%zu] %s\n", s, i + 1, cases.size(), what.c_str());
  };
  std::vector<Row> rows;
  nlohmann::json results = nlohmann::json::array();
  bool any_bad_input = false, any_failed = false;
  for (size_t i = 0; i < cases.size(); ++i) {
    SharedCase shared(cases[i].spec, device, o.deterministic, o.fp8_tensor_cores);
    for (const BenchVariant& v : *variants) {
      progress(i, cases[i].spec.name + " on " + v.backend + ":" +
                      generation_name(v.kernel_generation) + " (block " +
                      std::to_string(cases[i].spec.block_size) + ")");
      Outcome outcome = run_case(cases[i], v, shared, o);
      if (!outcome.row.error.empty()) {
        std::cerr << "pagedattn: " << cases[i].spec.name << " on " << outcome.row.variant << ": "
                  << outcome.row.error << "\n";
        (outcome.bad_input ? any_bad_input : any_failed) = true;
      }
      results.push_back(report_row(outcome.row, ceilings));
      rows.push_back(std::move(outcome.row));
      // After every row: a run stopped by a time limit still leaves what it measured.
      write_json(o, device, ceilings, results, none);
    }
  }
  const nlohmann::json ratios = report_part_ratios(rows);
  if (!write_json(o, device, ceilings, results, ratios)) {
    return bad_input("--json: cannot write '" + o.json_file + "'");
  }
  if (!o.json_file.empty()) std::cerr << "bench: wrote " << o.json_file << "\n";
  // Every case ran (or was reported); the status says whether all of them did.
  return any_bad_input ? kExitBadInput : any_failed ? kExitFailed : kExitOk;
}

CLI::Validator regex_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          std::regex check(value);
        } catch (const std::regex_error& e) {
          return "'" + testing::clip_for_message(value, 40) + "' is not a regular expression (" +
                 e.what() + ")";
        }
        return {};
      },
      "", "REGEX");
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time the benchmark suites (median after warm-up) with GFLOP/s and KV GB/s beside "
      "the read-bandwidth and compute ceilings measured in the same run");
  cmd->add_option("--suite", o->suite,
                  "decode, prefill, mixed, cascade, fp8, spec-verify, all (those six), "
                  "standard (the peer tool's shapes), overhead (mixed batch vs. its parts, "
                  "launch and build() host time) or fp8-prefill (prefills over an e4m3 cache "
                  "at pages of 128, D 128 and 256; with --fp8-tensor-cores on the FP8 kernel)")
      ->capture_default_str()
      ->check(
          CLI::IsMember(std::vector<std::string>(std::begin(kSuiteNames), std::end(kSuiteNames))));
  cmd->add_option("--backend", o->backend,
                  "BACKEND[:GEN],... : auto (the selector's choice), cpu, flash_attn, flashinfer, "
                  "each optionally with :auto, :v2 or :v3 (else --generation); a list runs every "
                  "case through each in turn on the same batch")
      ->capture_default_str()
      ->check(variants_validator());
  cmd->add_option("--json", o->json_file, "Also write the results as JSON to this file");
  cmd->add_option("--repeats", o->repeats, "Timed runs per case (the median is reported)")
      ->capture_default_str()
      ->check(integer_in_range(1, 100000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs before timing")
      ->capture_default_str()
      ->check(integer_in_range(0, 100000));
  cmd->add_option("--block-size", o->block_sizes,
                  "Block sizes to run every case at, comma-separated (default: the suite's: "
                  "128 for the standard suite's prefill shapes, 16 elsewhere)")
      ->delimiter(',')
      ->check(integer_in_range(1, 1 << 20));
  cmd->add_option("--filter", o->filter,
                  "Only the cases whose name matches this regular expression")
      ->check(regex_validator());
  add_generation_option(*cmd, o->kernel_generation);
  cmd->add_option("--kv-layout", o->kv_layout,
                  "NHD or HND: the cache layout of backends that take either (default NHD)");
  cmd->add_flag("--deterministic", o->deterministic,
                "Build every step in deterministic (batch-invariant) mode");
  cmd->add_flag("--fp8-tensor-cores", o->fp8_tensor_cores,
                "Layers over an e4m3 cache permit the FP8 tensor cores "
                "(AttentionImplParams::fp8_tensor_cores; the fp8-prefill suite)");
  cmd->add_flag("--list", o->list, "Print the cases (name, shape, block size) and exit");
  cmd->add_flag("--quick", o->quick,
                "Smaller cases and a shorter compute probe (CI): contexts / 4, the standard "
                "suite's lengths / 16; the read ceiling is measured in full, as serve does");
  cmd->callback([o, &exit_code] { exit_code = run_bench(*o); });
}

}  // namespace pagedattn::cli
