// The plot of a serve run: attention time per step over the run, one line per backend.
#pragma once

#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "serve/engine.h"

namespace pagedattn::serve {

// Whether the step-time axis is logarithmic: backends whose median steps differ more than 10x
// (a CPU beside GPUs) would flatten the fast ones on a linear axis.
bool step_time_axis_is_log(const std::vector<EngineRun>& runs);

Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title);

}  // namespace pagedattn::serve
