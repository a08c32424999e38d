// What a serve run reports: per backend the attention time per step (p50, p99), tokens per second
// of attention, KV-cache read bandwidth and its share of the device's read ceiling, cache use,
// prefix-cache hits, cascade steps, graph replays, preemptions and oracle checks; as a table with
// the backends side by side and as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/engine.h"

namespace pagedattn::serve {

struct Ceiling {
  double gbps = 0.0;  // 0 = not measured
  std::string method;
};

struct Summary {
  std::string backend, device;
  int steps = 0, decode_steps = 0, finished = 0, preemptions = 0, checks = 0;
  int cascade_steps = 0, graph_replays = 0;
  double p50_ms = 0, p99_ms = 0, total_ms = 0, build_p50_ms = 0;
  int64_t tokens = 0;
  double tokens_per_s = 0, kv_gbps = 0, read_share = 0;
  // The same over decode-only steps alone, where the KV read is the work (0 without such steps).
  double decode_kv_gbps = 0, decode_read_share = 0;
  Ceiling ceiling;
  double kv_mean = 0, kv_peak = 0, prefix_hit_rate = 0;
  std::string failure;
};

// q in [0, 1]: the nearest-rank quantile (0 for an empty list).
// value printed with a printf format of one double ("%.3f").
std::string format_value(const char* format, double value);

double quantile(std::vector<double> values, double q);
Summary summarize(const EngineRun& run, const Ceiling& ceiling);
// Rows are the metrics, columns the backends.
std::string format_table(const std::vector<Summary>& summaries);
nlohmann::json summary_json(const Summary& s);
// Every step of a run: arrays of the same length (step, reqs, tokens, ms, flags, KV use).
nlohmann::json steps_json(const EngineRun& run);

}  // namespace pagedattn::serve
