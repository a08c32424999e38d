#include "bench_measure.h"

#include <algorithm>
#include <chrono>

namespace pagedattn::cli {
namespace {

using Clock = std::chrono::steady_clock;

double us_between(Clock::time_point start, Clock::time_point stop) {
  return std::chrono::duration<double, std::micro>(stop - start).count();
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StatusOr<LaunchCost> measure_launch(testing::StepRunner& run, int calls, int warmup, int repeats) {
  LaunchCost cost;
  cost.calls = calls;
  for (int i = 0; i < warmup; ++i) PAGEDATTN_RETURN_IF_ERROR(run.forward(false));
  PAGEDATTN_RETURN_IF_ERROR(run.placement().synchronize());
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < calls; ++i) PAGEDATTN_RETURN_IF_ERROR(run.forward(false));
  const Clock::time_point issued = Clock::now();
  PAGEDATTN_RETURN_IF_ERROR(run.placement().synchronize());
  const Clock::time_point done = Clock::now();
  cost.host_us = us_between(start, issued) / calls;
  cost.wall_us = us_between(start, done) / calls;
  PAGEDATTN_ASSIGN_OR_RETURN(
      std::vector<double> device_ms,
      run.placement().time_ms([&run] { return run.forward(false); }, 0, repeats));
  cost.device_us = 1e3 * median(device_ms);
  return cost;
}

StatusOr<std::vector<double>> time_build_us(testing::StepRunner& run, int calls) {
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point start = Clock::now();
    PAGEDATTN_RETURN_IF_ERROR(run.build());
    times.push_back(us_between(start, Clock::now()));
  }
  return times;
}

}  // namespace pagedattn::cli
