// What one `pagedattn bench` run compares: a list of backends, each with a kernel generation
// (`--backend flash_attn:v2,flash_attn,flashinfer`), run case by case over one random batch.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "pagedattn/types.h"
#include "testing/case_spec.h"
#include "testing/host_batch.h"
#include "testing/step_runner.h"

namespace pagedattn::cli {

struct BenchVariant {
  std::string backend;    // "auto" or a backend's name or alias
  int kernel_generation;  // AttentionImplParams::kernel_generation: 0 auto, 2, 3
};

// "auto", "v2" or "v3".
std::string generation_name(int kernel_generation);

// Comma-separated BACKEND[:GEN] entries; an entry without ":GEN" takes `default_generation`.
// Errors name the entry and what is allowed.
StatusOr<std::vector<BenchVariant>> parse_variants(const std::string& text, int default_generation);
CLI::Validator variants_validator();

// The one device every variant runs on; an error when they name different ones.
StatusOr<Device> variants_device(const std::vector<BenchVariant>& variants);

// One case made once on the host (the random batch is the slow part of a large case) and run by
// each variant in turn: variants that read the same cache layout share the batch. The suites list
// their requests decode-first, so the order no builder would change is the order it runs.
class SharedCase {
 public:
  // deterministic: builders run in BuilderParams::deterministic mode (batch-invariant results);
  // fp8_tensor_cores: layers over an e4m3 cache permit the FP8 tensor cores.
  SharedCase(const testing::CaseSpec& spec, const Device& device, bool deterministic,
             bool fp8_tensor_cores)
      : spec_(spec),
        device_(device),
        deterministic_(deterministic),
        fp8_tensor_cores_(fp8_tensor_cores) {}
  // Selects the variant's backend for the case (forced unless "auto") and places the batch on the
  // device. Errors are bad input (the backend cannot serve the case).
  StatusOr<std::unique_ptr<testing::StepRunner>> runner(const BenchVariant& variant);

 private:
  testing::CaseSpec spec_;
  Device device_;
  bool deterministic_ = false;
  bool fp8_tensor_cores_ = false;
  std::vector<std::unique_ptr<testing::HostBatch>> batches_;  // at most one per layout
};

}  // namespace pagedattn::cli
