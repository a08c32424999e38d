// The plot of a serve run as SVG: attention time per step over the run, one panel per backend on
// one log time axis, each step a marker whose colour and shape say its kind.
#pragma once

#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "serve/engine.h"

namespace pagedattn::serve {

enum class StepKind { kDecodeOnly, kMixed, kPrefill };

// Decode-only: every request schedules one token; prefill: every request schedules more (prompt
// chunks); mixed: both in one step.
StepKind step_kind(const StepRecord& step);
const char* step_kind_name(StepKind kind);

std::string step_time_svg(const std::vector<EngineRun>& runs, const std::string& title);
Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title);

}  // namespace pagedattn::serve
