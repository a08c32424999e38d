// write_step_time_plot: axes with ticks, one polyline per backend, a legend, a title.
#include "serve/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "serve/canvas.h"
#include "serve/png.h"

namespace pagedattn::serve {
namespace {

constexpr Color kInk = {40, 40, 40}, kGrid = {225, 225, 225}, kWhite = {255, 255, 255};
constexpr Color kSeries[] = {
    {31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}};

std::string tick_label(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 0.01 ? "%.2f" : "%.0e", v);
  return text;
}

// A round step (1, 2 or 5 times a power of ten) giving about `n` ticks over [0, max].
double nice_step(double max, int n) {
  const double raw = max / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

}  // namespace

bool step_time_axis_is_log(const std::vector<EngineRun>& runs) {
  double y_max = 0.0, y_min = 0.0;          // y_min: the smallest positive step time
  double median_lo = 0.0, median_hi = 0.0;  // the fastest and slowest backend's median step
  for (const EngineRun& run : runs) {
    if (run.steps.empty()) continue;
    std::vector<double> times;
    for (const StepRecord& r : run.steps) {
      const double ms = r.result.attention_ms;
      times.push_back(ms);
      y_max = std::max(y_max, ms);
      if (ms > 0 && (y_min == 0 || ms < y_min)) y_min = ms;
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    const double median = times[times.size() / 2];
    median_lo = median_lo == 0 ? median : std::min(median_lo, median);
    median_hi = std::max(median_hi, median);
  }
  return median_lo > 0 && median_hi / median_lo > 10 && y_max / y_min > 100;
}

Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title) {
  const int width = 1000, height = 480, left = 70, right = 20, top = 50, bottom = 50;
  const int pw = width - left - right, ph = height - top - bottom;
  Canvas c(width, height, kWhite);
  double y_max = 0.0, y_min = 0.0;  // y_min: the smallest positive step time
  int x_max = 1;
  for (const EngineRun& run : runs) {
    for (const StepRecord& r : run.steps) {
      y_max = std::max(y_max, r.result.attention_ms);
      if (r.result.attention_ms > 0 && (y_min == 0 || r.result.attention_ms < y_min)) {
        y_min = r.result.attention_ms;
      }
    }
    if (!run.steps.empty()) x_max = std::max(x_max, run.steps.back().step);
  }
  if (y_max <= 0) y_max = y_min = 1;
  const bool log_y = step_time_axis_is_log(runs);
  const double x_step = nice_step(x_max, 8);
  double y_lo = 0, y_step = nice_step(y_max, 5);
  if (log_y) {
    y_lo = std::floor(std::log10(y_min));
    y_max = std::ceil(std::log10(y_max));
    y_step = 1;
  } else {
    y_max = std::ceil(y_max / y_step) * y_step;
  }
  auto px = [&](double step) { return left + static_cast<int>(std::lround(step / x_max * pw)); };
  auto py = [&](double ms) {
    const double y = log_y ? std::log10(std::max(ms, std::pow(10.0, y_lo))) : ms;
    return top + ph - static_cast<int>(std::lround((y - y_lo) / (y_max - y_lo) * ph));
  };

  for (double v = y_lo; v <= y_max + 1e-9; v += y_step) {
    const double ms = log_y ? std::pow(10.0, v) : v;
    c.line(left, py(ms), left + pw, py(ms), kGrid);
    const std::string label = tick_label(ms);
    c.text(left - 8 - Canvas::text_width(label), py(ms) - 3, label, kInk);
  }
  for (double s = 0; s <= x_max + 1e-9; s += x_step) {
    c.line(px(s), top + ph, px(s), top + ph + 4, kInk);
    const std::string label = std::to_string(static_cast<int>(s));
    c.text(px(s) - Canvas::text_width(label) / 2, top + ph + 8, label, kInk);
  }
  c.line(left, top, left, top + ph, kInk);
  c.line(left, top + ph, left + pw, top + ph, kInk);
  c.text(left, 14, title, kInk, 2);
  c.text(left + pw / 2 - Canvas::text_width("step") / 2, height - 18, "step", kInk);
  c.text(8, top - 14, log_y ? "attention ms (log scale)" : "attention ms", kInk);

  for (size_t i = 0; i < runs.size(); ++i) {
    const Color color = kSeries[i % std::size(kSeries)];
    const std::vector<StepRecord>& steps = runs[i].steps;
    for (size_t k = 1; k < steps.size(); ++k) {
      c.line(px(steps[k - 1].step), py(steps[k - 1].result.attention_ms), px(steps[k].step),
             py(steps[k].result.attention_ms), color);
    }
    const int ly = top + 8 + static_cast<int>(i) * 14;
    const int lx = left + pw - 10 - Canvas::text_width(runs[i].backend) - 16;
    c.rect(lx, ly, 10, 7, color);
    c.text(lx + 16, ly, runs[i].backend, kInk);
  }
  return write_png(path, width, height, c.rgb());
}

}  // namespace pagedattn::serve
