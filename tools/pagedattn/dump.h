// `check --dump DIR`: every tensor of a case run as little-endian C-order .npy plus meta.json, as
// docs/cases.md lists them, for an independent checker.
#pragma once

#include <string>

#include "pagedattn/status.h"
#include "reference/compare.h"
#include "runner.h"

namespace pagedattn::cli {

// Creates `dir` if needed and checks that it is a directory this process can write to.
Status prepare_dump_dir(const std::string& dir);
Status dump_case(const std::string& dir, const StepRunner& run, const reference::Comparison& result);

}  // namespace pagedattn::cli
