#include "serve/dcp_report.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "serve/report.h"

namespace pagedattn::serve {
DcpSummary summarize_dcp(const EngineRun& run) {
  DcpSummary s;
  s.world_size = run.dcp_world_size;
  s.comm = run.dcp_comm;
  s.rank_kv_mib = static_cast<double>(run.rank_kv_cache_bytes) / (1 << 20);
  s.single_kv_mib = static_cast<double>(run.single_rank_kv_cache_bytes) / (1 << 20);
  std::vector<double> ms, single_ms;
  for (const StepRecord& r : run.steps) {
    ms.push_back(r.result.attention_ms);
    single_ms.push_back(r.result.single_rank_ms);
    s.total_ms += r.result.attention_ms;
    s.single_total_ms += r.result.single_rank_ms;
    const double kib = r.result.dcp_received_bytes / 1024;
    s.received_kib_mean += kib;
    s.received_kib_max = std::max(s.received_kib_max, kib);
  }
  if (!run.steps.empty()) s.received_kib_mean /= static_cast<double>(run.steps.size());
  s.p50_ms = quantile(ms, 0.5);
  s.single_p50_ms = quantile(single_ms, 0.5);
  return s;
}

std::string format_dcp_table(const DcpSummary& s) {
  const std::string n = std::to_string(s.world_size);
  const std::vector<std::vector<std::string>> rows = {
      {"", "N = " + n + " (" + s.comm + ")", "N = 1"},
      {"KV cache per rank MiB", format_value("%.1f", s.rank_kv_mib),
       format_value("%.1f", s.single_kv_mib)},
      {"received per rank/step KiB mean", format_value("%.1f", s.received_kib_mean), "0"},
      {"received per rank/step KiB max", format_value("%.1f", s.received_kib_max), "0"},
      {"attention ms/step p50", format_value("%.3f", s.p50_ms),
       format_value("%.3f", s.single_p50_ms)},
      {"attention total s", format_value("%.3f", s.total_ms * 1e-3),
       format_value("%.3f", s.single_total_ms * 1e-3)},
  };
  std::vector<size_t> widths(3, 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    out += row[0] + std::string(widths[0] - row[0].size() + 2, ' ');
    out += std::string(widths[1] - row[1].size(), ' ') + row[1] + "   ";
    out += std::string(widths[2] - row[2].size(), ' ') + row[2] + "\n";
  }
  return out;
}

nlohmann::json dcp_json(const DcpSummary& s) {
  return {{"world_size", s.world_size},
          {"comm_backend", s.comm},
          {"rank_kv_cache_mib", s.rank_kv_mib},
          {"single_rank_kv_cache_mib", s.single_kv_mib},
          {"received_kib_per_step_mean", s.received_kib_mean},
          {"received_kib_per_step_max", s.received_kib_max},
          {"attention_ms_p50", s.p50_ms},
          {"single_rank_attention_ms_p50", s.single_p50_ms},
          {"attention_ms_total", s.total_ms},
          {"single_rank_attention_ms_total", s.single_total_ms}};
}

}  // namespace pagedattn::serve
