// Tick placement and labels for plot.cc.
#include "serve/plot_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pagedattn::serve {

LogAxis log_axis(double min_positive, double max, bool has_zero) {
  LogAxis axis;
  axis.zero_lane = has_zero;
  if (min_positive <= 0 || max <= 0) return axis;  // no positive value: one decade, 1 to 10
  const int lo = static_cast<int>(std::floor(std::log10(min_positive)));
  const int hi = std::max(lo + 1, static_cast<int>(std::ceil(std::log10(max))));
  axis.lo = std::pow(10.0, lo);
  axis.hi = std::pow(10.0, hi);
  const bool label_between = hi - lo <= 2;
  for (int e = lo; e <= hi; ++e) {
    const double decade = std::pow(10.0, e);
    axis.ticks.push_back({decade, tick_label(decade)});
    if (e == hi) break;
    for (double m : {2.0, 5.0})
      axis.ticks.push_back({m * decade, label_between ? tick_label(m * decade) : ""});
  }
  return axis;
}

std::vector<Tick> linear_ticks(double max, int count) {
  max = std::max(max, 1.0);
  const double raw = max / count, power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * power;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  std::vector<Tick> ticks;
  for (int i = 0; i == 0 || ticks.back().value < max; ++i)
    ticks.push_back({i * step, tick_label(i * step)});
  return ticks;
}

std::string tick_label(double value) {
  if (value == 0) return "0";
  const int decimals =
      std::max(0, -static_cast<int>(std::floor(std::log10(std::fabs(value)) + 1e-9)));
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

}  // namespace pagedattn::serve
