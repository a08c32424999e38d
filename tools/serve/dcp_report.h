// What a DCP serve run reports beside N = 1: KV cache per rank, bytes one rank receives from the
// others per step, and attention time per step, as a two-column table and as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/engine.h"

namespace pagedattn::serve {

struct DcpSummary {
  int world_size = 1;
  std::string comm;
  double rank_kv_mib = 0, single_kv_mib = 0;
  double received_kib_mean = 0, received_kib_max = 0;  // per rank and step
  double p50_ms = 0, single_p50_ms = 0, total_ms = 0, single_total_ms = 0;
};

DcpSummary summarize_dcp(const EngineRun& run);
std::string format_dcp_table(const DcpSummary& s);
nlohmann::json dcp_json(const DcpSummary& s);

}  // namespace pagedattn::serve
