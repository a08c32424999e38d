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

StatusOr<LaunchCost> measure_launch(testing::StepRunner& run, int calls, int free_calls,
                                    int warmup) {
  LaunchCost cost;
  cost.calls = calls;
  cost.free_calls = free_calls;
  for (int i = 0; i < warmup; ++i) PAGEDATTN_RETURN_IF_ERROR(run.forward(false));
  PAGEDATTN_RETURN_IF_ERROR(run.placement().synchronize());
#if PAGEDATTN_WITH_CUDA
  if (run.device().is_cuda()) PAGEDATTN_RETURN_IF_ERROR(measure_held_launch(run, cost));
#endif
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < free_calls; ++i) PAGEDATTN_RETURN_IF_ERROR(run.forward(false));
  const Clock::time_point issued = Clock::now();
  PAGEDATTN_RETURN_IF_ERROR(run.placement().synchronize());
  cost.wall_us = us_between(start, Clock::now()) / free_calls;
  if (run.device().is_cpu()) {  // the host runs each call: issuing is running
    cost.calls = free_calls;
    cost.host_us = cost.device_us = us_between(start, issued) / free_calls;
  }
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
