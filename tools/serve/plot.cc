// write_step_time_plot: axes with ticks, one polyline per backend, a legend, a title.
#include "serve/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "serve/canvas.h"
#include "serve/png.h"

namespace pagedattn::serve {
namespace {

constexpr Color kInk = {40, 40, 40}, kGrid = {225, 225, 225}, kWhite = {255, 255, 255};
constexpr Color kSeries[] = {
    {31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}};

std::string tick_label(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
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

Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title) {
  const int width = 1000, height = 480, left = 70, right = 20, top = 50, bottom = 50;
  const int pw = width - left - right, ph = height - top - bottom;
  Canvas c(width, height, kWhite);
  double y_max = 0.0;
  int x_max = 1;
  for (const EngineRun& run : runs) {
    for (const StepRecord& r : run.steps) y_max = std::max(y_max, r.result.attention_ms);
    if (!run.steps.empty()) x_max = std::max(x_max, run.steps.back().step);
  }
  if (y_max <= 0) y_max = 1;
  const double y_step = nice_step(y_max, 5), x_step = nice_step(x_max, 8);
  y_max = std::ceil(y_max / y_step) * y_step;
  auto px = [&](double step) { return left + static_cast<int>(std::lround(step / x_max * pw)); };
  auto py = [&](double ms) { return top + ph - static_cast<int>(std::lround(ms / y_max * ph)); };

  for (double v = 0; v <= y_max + 1e-9; v += y_step) {
    c.line(left, py(v), left + pw, py(v), kGrid);
    const std::string label = tick_label(v);
    c.text(left - 8 - Canvas::text_width(label), py(v) - 3, label, kInk);
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
  c.text(8, top - 14, "attention ms", kInk);

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
