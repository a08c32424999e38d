// The host-side measurements of `pagedattn bench`: how long one forward call takes to issue (one
// layer's launch overhead) and how long builder.build() takes, on the host's steady clock.
#pragma once

#include <vector>

#include "pagedattn/status.h"
#include "testing/step_runner.h"

namespace pagedattn::cli {

double median(std::vector<double> v);

struct LaunchCost {
  int calls = 0;
  double host_us = 0.0;    // per call, issuing `calls` forward calls back to back
  double wall_us = 0.0;    // per call, the same until the device has finished them all
  double device_us = 0.0;  // one call on the device's clock (median of repeats)
  // The device kept up: issuing, not the device, set the pace, so host_us is the launch cost.
  bool host_bound() const { return host_us >= device_us; }
};
// After `warmup` calls; the device time is timed separately over `repeats` calls.
StatusOr<LaunchCost> measure_launch(testing::StepRunner& run, int calls, int warmup, int repeats);

// Host microseconds of each of `calls` builder.build() calls on the case's metadata.
StatusOr<std::vector<double>> time_build_us(testing::StepRunner& run, int calls);

}  // namespace pagedattn::cli
