// The plot of a serve run: attention time per step over the run, one line per backend.
#pragma once

#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "serve/engine.h"

namespace pagedattn::serve {

Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title);

}  // namespace pagedattn::serve
