// The CLI's side of a step: the backend the selector picks for a case (or the one forced), on
// the device it runs on, driven by testing::StepRunner. `check`, `bench` and `demo` share it.
#pragma once

#include <memory>
#include <string>

#include "testing/case_spec.h"
#include "testing/step_runner.h"

namespace pagedattn::cli {

using testing::CascadeMode;
using testing::StepRunner;

// Selects the backend ("auto" or a name) and prepares the case on it. Errors here are bad input;
// a machine with less host memory than the case needs gets one naming the size, not abort().
StatusOr<std::unique_ptr<StepRunner>> prepare_case(const testing::CaseSpec& spec,
                                                   const std::string& backend,
                                                   const testing::StepOptions& options = {});

}  // namespace pagedattn::cli
