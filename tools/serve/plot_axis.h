// The ticks of the step-time plot's axes: a log axis in decades for times (a decode step of 0.1 ms
// stays readable beside a 200 ms prefill), a linear axis from 0 for steps; labels are plain
// numbers ("0", "0.01", "1000"), never an exponent.
#pragma once

#include <string>
#include <vector>

namespace pagedattn::serve {

struct Tick {
  double value;
  std::string label;  // empty: a gridline only
};

struct LogAxis {
  double lo = 1, hi = 10;  // powers of ten around the positive values
  bool zero_lane = false;  // values <= 0 sit in a lane below lo, labelled "0"
  std::vector<Tick> ticks;
};

// Decades from below min_positive to above max; 2 and 5 between them are labelled when the axis
// spans at most two decades, else gridlines only.
LogAxis log_axis(double min_positive, double max, bool has_zero);
// Round steps (1, 2 or 5 times a power of ten), about `count` of them, from 0 to at least max.
std::vector<Tick> linear_ticks(double max, int count);
// A tick value as text: 0 is "0"; one significant digit below 1 ("0.05"), whole numbers above.
std::string tick_label(double value);

}  // namespace pagedattn::serve
