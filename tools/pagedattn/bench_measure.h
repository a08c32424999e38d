// The host-side measurements of `pagedattn bench`: how long one forward call takes to issue (one
// layer's launch overhead) and how long builder.build() takes, on the host's steady clock.
#pragma once

#include <vector>

#include "pagedattn/config.h"
#include "pagedattn/status.h"
#include "testing/step_runner.h"

namespace pagedattn::cli {

double median(std::vector<double> v);

struct LaunchCost {
  int calls = 0;           // forward calls issued for host_us and device_us
  double host_us = 0.0;    // per call, issuing them (on CUDA while the device is held busy)
  double device_us = 0.0;  // per call, the device running them back to back
  int free_calls = 0;      // forward calls issued and run freely for wall_us
  double wall_us = 0.0;    // per call, until the device has finished them all
  // CUDA: the device was still held when the host had issued every call, so no call waited for it.
  bool held = true;
  // Issuing, not the device, sets the pace of a layer: host_us is the launch overhead.
  bool host_bound() const { return host_us >= device_us; }
};
// After `warmup` calls: `calls` calls timed as LaunchCost says, then `free_calls` run freely.
StatusOr<LaunchCost> measure_launch(testing::StepRunner& run, int calls, int free_calls,
                                    int warmup);

#if PAGEDATTN_WITH_CUDA
// CUDA: memsets queued ahead hold the device while the host issues `calls` forward calls (host
// time per call, none waiting for the device); released, the device runs them back to back
// between two events (its time per call, without the host's gaps). Fills calls, host_us,
// device_us and held.
Status measure_held_launch(testing::StepRunner& run, LaunchCost& cost);
#endif

// Host microseconds of each of `calls` builder.build() calls on the case's metadata.
StatusOr<std::vector<double>> time_build_us(testing::StepRunner& run, int calls);

}  // namespace pagedattn::cli
