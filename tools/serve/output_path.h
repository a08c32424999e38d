// serve's output files (the plot and the JSON): where they go by default, and the check made
// before a run, so that a bad path costs no run.
#pragma once

#include <string>

#include "pagedattn/status.h"

namespace pagedattn::serve {

// The default directory of the outputs, made on first use (ignored by git).
inline constexpr const char* kOutputDir = "serve-out";

// Whether `path` can be written ('' = no file: nothing to check), as the value of `flag`; a
// non-empty `extension` (".svg") is required. Makes kOutputDir when the path is in it; any other
// directory must exist. Leaves no file behind. The error names the flag, the path and why.
Status check_output_file(const std::string& flag, const std::string& path,
                         const std::string& extension);

}  // namespace pagedattn::serve
