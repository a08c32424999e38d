// `pagedattn check CASE.json...`: run each case through a backend and compare with the float64
// oracle (docs/cases.md). Exit 0 all passed, 1 one failed, 2 bad input.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench_suites.h"
#include "commands.h"
#include "common.h"
#include "dump.h"
#include "runner.h"

namespace pagedattn::cli {
namespace {

struct CheckOptions {
  std::vector<std::string> cases;
  std::string backend = "auto";
  std::string dump_dir;
  bool json = false;
  CascadeMode cascade = CascadeMode::kAuto;
  int kernel_generation = 0;
};

struct CaseResult {
  std::string name;
  std::string backend = "-";
  std::string kernel_generation = "-";
  int exit_code = kExitOk;
  reference::Comparison comparison;
  reference::Tolerance tolerance{};
  std::string error;
};

CaseResult check_one(const std::string& path, const CheckOptions& o) {
  CaseResult result;
  result.name = path;
  StatusOr<testing::CaseSpec> spec = testing::load_case_file(path);
  if (!spec.ok()) {
    result.exit_code = kExitBadInput;
    result.error = spec.status().message();
    return result;
  }
  result.name = spec->name;
  result.tolerance = reference::tolerance_for(spec->dtype);
  testing::StepOptions options;
  options.cascade = o.cascade;
  options.kernel_generation = o.kernel_generation;
  StatusOr<std::unique_ptr<StepRunner>> prepared = prepare_case(*spec, o.backend, options);
  if (!prepared.ok()) {
    result.exit_code = kExitBadInput;
    result.error = prepared.status().message();
    return result;
  }
  StepRunner& run = **prepared;
  result.backend = std::string(run.backend().name());
  result.kernel_generation = std::string(run.kernel_generation());
  if (run.cascade_prefix_len() > 0) result.kernel_generation += ", cascade";
  if (Status s = run.placement().poison_outputs(); !s.ok()) {
    result.exit_code = kExitFailed;
    result.error = s.message();
    return result;
  }
  if (Status s = run.build(); !s.ok()) {  // the builder rejects an impossible batch
    result.exit_code = kExitBadInput;
    result.error = "metadata build: " + s.message();
    return result;
  }
  if (Status s = run.execute(); !s.ok()) {
    result.exit_code = kExitFailed;
    result.error = s.to_string();
    return result;
  }
  // The scalar oracle does about 1 GFLOP/s: say so before a long wait.
  if (const double flops = case_work(run.spec()).flops; flops > 2e10) {
    std::fprintf(stderr, "check: %s: float64 oracle over %.0f GFLOP, this takes a while...\n",
                 result.name.c_str(), flops / 1e9);
  }
  StatusOr<reference::Comparison> comparison = run.verify();
  if (!comparison.ok()) {
    result.exit_code = kExitFailed;
    result.error = "oracle: " + comparison.status().message();
    return result;
  }
  result.comparison = *comparison;
  result.exit_code = comparison->pass ? kExitOk : kExitFailed;
  if (!o.dump_dir.empty()) {
    if (Status d = dump_case(o.dump_dir, run, *comparison); !d.ok()) {
      result.exit_code = kExitBadInput;
      result.error = d.message();
    }
  }
  return result;
}

void print_line(const CaseResult& r) {
  const std::string backend =
      r.backend == "-" ? std::string("-") : r.backend + " (" + r.kernel_generation + ")";
  if (!r.error.empty()) {
    std::printf("%-28s %-24s %s: %s\n", r.name.c_str(), backend.c_str(),
                r.exit_code == kExitBadInput ? "ERROR" : "FAIL", r.error.c_str());
    return;
  }
  const reference::Comparison& c = r.comparison;
  std::printf("%-28s %-24s max_abs_err=%.3e tol=%g+%g*|ref| rel_frob=%.2e<=%g %s\n", r.name.c_str(),
              backend.c_str(), c.max_abs_error, r.tolerance.atol, r.tolerance.rtol, c.rel_frobenius,
              r.tolerance.max_rel_frobenius, c.pass ? "PASS" : "FAIL");
  if (!c.pass && !c.detail.empty()) std::printf("%s", c.detail.c_str());
}

nlohmann::json to_json(const CaseResult& r) {
  nlohmann::json j;
  j["name"] = r.name;
  j["backend"] = r.backend;
  j["kernel_generation"] = r.kernel_generation;
  j["status"] = r.exit_code == kExitOk ? "PASS" : (r.exit_code == kExitFailed ? "FAIL" : "ERROR");
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  j["max_abs_error"] = r.comparison.max_abs_error;
  j["rel_frobenius"] = r.comparison.rel_frobenius;
  j["max_lse_error"] = r.comparison.max_lse_error;
  j["atol"] = r.tolerance.atol;
  j["rtol"] = r.tolerance.rtol;
  j["max_rel_frobenius"] = r.tolerance.max_rel_frobenius;
  if (!r.comparison.detail.empty()) j["detail"] = r.comparison.detail;
  return j;
}

int run_check(const CheckOptions& o) {
  if (!o.dump_dir.empty() && o.cases.size() != 1) {
    return bad_input("--dump takes one case at a time (got " + std::to_string(o.cases.size()) +
                     ")");
  }
  // Before the run: a dump that cannot be written is bad input, found before minutes of oracle.
  if (!o.dump_dir.empty()) {
    if (Status s = prepare_dump_dir(o.dump_dir); !s.ok()) return bad_input(s);
  }
  int exit_code = kExitOk;
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& path : o.cases) {
    CaseResult r = check_one(path, o);
    exit_code = std::max(exit_code, r.exit_code);
    if (o.json) {
      all.push_back(to_json(r));
    } else {
      print_line(r);
      std::fflush(stdout);
    }
  }
  if (o.json) std::cout << all.dump(1) << "\n";
  return exit_code;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd =
      app.add_subcommand("check",
                         "Run case files through a backend and compare with the float64 oracle "
                         "(exit 0 all pass, 1 a failure, 2 bad input)");
  cmd->add_option("cases", o->cases, "Case files (JSON, see cases.md)")->required();
  cmd->add_option("--backend", o->backend,
                  "auto (the selector's choice), cpu, flash_attn, flashinfer")
      ->capture_default_str()
      ->check(backend_validator(true));
  cmd->add_option("--dump", o->dump_dir, "Write every tensor of the (single) case as .npy here")
      ->check(non_empty("directory name"));
  cmd->add_flag("--json", o->json, "Print the results as JSON");
  cmd->add_option_function<std::string>(
         "--cascade",
         [o](const std::string& mode) {
           o->cascade = mode == "always"  ? CascadeMode::kAlways
                        : mode == "never" ? CascadeMode::kNever
                                          : CascadeMode::kAuto;
         },
         "Shared prefix: auto (the builder's use_cascade_attention rule, as an engine), always "
         "(pass common_prefix_len to build), never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  add_generation_option(*cmd, o->kernel_generation);
  cmd->callback([o, &exit_code] { exit_code = run_check(*o); });
}

}  // namespace pagedattn::cli
