// The rows of `pagedattn bench`: one per (case, variant), printed as soon as measured (a long run
// shows its table as it goes) and returned as JSON; and the mixed-batch summaries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_measure.h"
#include "bench_suites.h"
#include "probes.h"

namespace pagedattn::cli {

struct Ceilings {
  Ceiling bandwidth;   // GB/s
  Ceiling compute;     // GFLOP/s
  Ceiling paged_read;  // GB/s, the host's read rate of scattered blocks (CPU only)
};

struct Row {
  BenchCase bench_case;          // the case as run
  std::string variant;           // as asked: "flash_attn:v2"
  std::string backend;           // the backend that ran: "FLASH_ATTN"
  std::string label;             // "FLASH_ATTN (v2)"
  std::string generation;        // what the backend used: "v2", "v3", "v3/v2", "decode+v2", "cpu"
  std::vector<double> times_ms;  // forward on the device's clock (every measure)
  std::optional<LaunchCost> launch;
  std::vector<double> build_us;
  std::string error;  // set when the case did not run
};

void print_header(const std::string& device, const Ceilings& ceilings);
nlohmann::json report_row(const Row& row, const Ceilings& ceilings);
// For each batch whose parts were timed alone (BenchCase::part_of), per variant and block size:
// the batch's time over the sum of its parts'. Printed and returned.
nlohmann::json report_part_ratios(const std::vector<Row>& rows);

}  // namespace pagedattn::cli
