// Summaries, the side-by-side table and the JSON of a serve run.
#include "serve/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pagedattn::serve {
std::string format_value(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

Summary summarize(const EngineRun& run, const Ceiling& ceiling) {
  Summary s;
  s.backend = run.backend;
  s.device = run.device;
  s.steps = static_cast<int>(run.steps.size());
  s.finished = run.finished;
  s.preemptions = run.preemptions;
  s.checks = run.checks;
  s.failure = run.failure;
  s.ceiling = ceiling;
  std::vector<double> ms, build;
  double bytes = 0, decode_bytes = 0, decode_ms = 0;
  for (const StepRecord& r : run.steps) {
    if (r.decode_only) {
      decode_bytes += r.result.kv_bytes;
      decode_ms += r.result.attention_ms;
    }
    ms.push_back(r.result.attention_ms);
    build.push_back(r.result.build_ms);
    s.total_ms += r.result.attention_ms;
    s.tokens += r.num_tokens;
    bytes += r.result.kv_bytes;
    s.decode_steps += r.decode_only;
    s.cascade_steps += r.result.cascade;
    s.graph_replays += r.result.graph;
    s.kv_mean += r.kv_usage;
    s.kv_peak = std::max(s.kv_peak, r.kv_usage);
  }
  if (s.steps > 0) s.kv_mean /= s.steps;
  s.p50_ms = quantile(ms, 0.5);
  s.p99_ms = quantile(ms, 0.99);
  s.build_p50_ms = quantile(build, 0.5);
  if (s.total_ms > 0) {
    s.tokens_per_s = s.tokens / (s.total_ms * 1e-3);
    s.kv_gbps = bytes / (s.total_ms * 1e6);
  }
  if (decode_ms > 0) s.decode_kv_gbps = decode_bytes / (decode_ms * 1e6);
  if (ceiling.gbps > 0) {
    s.read_share = s.kv_gbps / ceiling.gbps;
    s.decode_read_share = s.decode_kv_gbps / ceiling.gbps;
  }
  if (run.prefix_query_tokens > 0)
    s.prefix_hit_rate = static_cast<double>(run.prefix_hit_tokens) / run.prefix_query_tokens;
  return s;
}

std::string format_table(const std::vector<Summary>& summaries) {
  using Cell = std::string (*)(const Summary&);
  const std::vector<std::pair<const char*, Cell>> rows = {
      {"device", [](const Summary& s) { return s.device; }},
      {"steps (decode-only)",
       [](const Summary& s) {
         return std::to_string(s.steps) + " (" + std::to_string(s.decode_steps) + ")";
       }},
      {"requests finished", [](const Summary& s) { return std::to_string(s.finished); }},
      {"attention ms/step p50", [](const Summary& s) { return format_value("%.3f", s.p50_ms); }},
      {"attention ms/step p99", [](const Summary& s) { return format_value("%.3f", s.p99_ms); }},
      {"attention total s",
       [](const Summary& s) { return format_value("%.3f", s.total_ms * 1e-3); }},
      {"build ms/step p50 (host)",
       [](const Summary& s) { return format_value("%.3f", s.build_p50_ms); }},
      {"tokens/s of attention",
       [](const Summary& s) { return format_value("%.0f", s.tokens_per_s); }},
      {"KV read GB/s", [](const Summary& s) { return format_value("%.1f", s.kv_gbps); }},
      {"share of read ceiling",
       [](const Summary& s) {
         return s.ceiling.gbps > 0 ? format_value("%.0f%%", 100 * s.read_share) +
                                         format_value(" of %.0f GB/s", s.ceiling.gbps)
                                   : std::string("not measured");
       }},
      {"decode-only KV read GB/s",
       [](const Summary& s) {
         return format_value("%.1f", s.decode_kv_gbps) +
                (s.ceiling.gbps > 0 ? format_value(" (%.0f%%)", 100 * s.decode_read_share) : "");
       }},
      {"KV cache use mean/peak",
       [](const Summary& s) {
         return format_value("%.0f%%", 100 * s.kv_mean) + " / " +
                format_value("%.0f%%", 100 * s.kv_peak);
       }},
      {"prefix cache hits",
       [](const Summary& s) { return format_value("%.0f%% of tokens", 100 * s.prefix_hit_rate); }},
      {"cascade steps", [](const Summary& s) { return std::to_string(s.cascade_steps); }},
      {"CUDA graph replays", [](const Summary& s) { return std::to_string(s.graph_replays); }},
      {"preemptions", [](const Summary& s) { return std::to_string(s.preemptions); }},
      {"oracle checks",
       [](const Summary& s) {
         return std::to_string(s.checks) + (s.failure.empty() ? " passed" : ", FAILED");
       }},
  };
  size_t label_width = 0;
  for (const auto& [label, cell] : rows)
    label_width = std::max(label_width, std::string(label).size());
  std::vector<size_t> widths;
  for (const Summary& s : summaries) {
    size_t w = s.backend.size();
    for (const auto& [label, cell] : rows) w = std::max(w, cell(s).size());
    widths.push_back(w);
  }
  auto line = [&](const std::string& label, const std::vector<std::string>& cells) {
    std::string out = label + std::string(label_width - label.size() + 2, ' ');
    for (size_t i = 0; i < cells.size(); ++i) {
      out += std::string(widths[i] - cells[i].size(), ' ') + cells[i] +
             (i + 1 < cells.size() ? "   " : "");
    }
    return out + "\n";
  };
  std::vector<std::string> header;
  for (const Summary& s : summaries) header.push_back(s.backend);
  std::string out = line("", header);
  for (const auto& [label, cell] : rows) {
    std::vector<std::string> cells;
    for (const Summary& s : summaries) cells.push_back(cell(s));
    out += line(label, cells);
  }
  return out;
}

nlohmann::json summary_json(const Summary& s) {
  return {{"backend", s.backend},
          {"device", s.device},
          {"steps", s.steps},
          {"decode_only_steps", s.decode_steps},
          {"requests_finished", s.finished},
          {"attention_ms_p50", s.p50_ms},
          {"attention_ms_p99", s.p99_ms},
          {"attention_ms_total", s.total_ms},
          {"build_ms_p50", s.build_p50_ms},
          {"tokens", s.tokens},
          {"tokens_per_s", s.tokens_per_s},
          {"kv_read_gbps", s.kv_gbps},
          {"read_ceiling_gbps", s.ceiling.gbps},
          {"read_ceiling_method", s.ceiling.method},
          {"read_ceiling_share", s.read_share},
          {"decode_only_kv_read_gbps", s.decode_kv_gbps},
          {"decode_only_read_ceiling_share", s.decode_read_share},
          {"kv_usage_mean", s.kv_mean},
          {"kv_usage_peak", s.kv_peak},
          {"prefix_cache_hit_rate", s.prefix_hit_rate},
          {"cascade_steps", s.cascade_steps},
          {"cuda_graph_replays", s.graph_replays},
          {"preemptions", s.preemptions},
          {"oracle_checks", s.checks},
          {"oracle_failure", s.failure}};
}

nlohmann::json steps_json(const EngineRun& run) {
  nlohmann::json j;
  for (const StepRecord& r : run.steps) {
    j["step"].push_back(r.step);
    j["num_reqs"].push_back(r.num_reqs);
    j["num_tokens"].push_back(r.num_tokens);
    j["prefill_tokens"].push_back(r.num_prefill_tokens);
    j["attention_ms"].push_back(r.result.attention_ms);
    j["build_ms"].push_back(r.result.build_ms);
    j["kv_usage"].push_back(r.kv_usage);
    j["cascade"].push_back(r.result.cascade);
    j["graph"].push_back(r.result.graph);
    j["graph_batch"].push_back(r.result.graph_batch);
    j["preempted"].push_back(r.preempted);
    if (run.dcp_world_size > 1) {
      j["dcp_received_bytes"].push_back(r.result.dcp_received_bytes);
      j["single_rank_attention_ms"].push_back(r.result.single_rank_ms);
    }
  }
  return j;
}

}  // namespace pagedattn::serve
