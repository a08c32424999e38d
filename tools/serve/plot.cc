// step_time_svg: a title and a legend of the step kinds, then per backend a panel with its log time
// axis, step axis, the run's path through its steps and a marker per step.
#include "serve/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "serve/plot_axis.h"
#include "serve/report.h"
#include "serve/svg.h"

namespace pagedattn::serve {
namespace {

constexpr int kWidth = 960, kLeft = 80, kRight = 30, kTop = 70;
constexpr int kHeader = 22, kPlotHeight = 220, kFooter = 30,
              kPanel = kHeader + kPlotHeight + kFooter;
constexpr int kZeroLane = 24;  // below the log range, for steps that took no measurable time
constexpr int kInset = 6;
constexpr StepKind kKinds[] = {StepKind::kDecodeOnly, StepKind::kMixed, StepKind::kPrefill};

const char* kind_colour(StepKind kind) {
  switch (kind) {
    case StepKind::kDecodeOnly: return "#4477aa";
    case StepKind::kMixed: return "#228833";
    case StepKind::kPrefill: return "#cc3311";
  }
  return "black";
}

// Circle, square or triangle, so that the kinds differ without colour too.
void marker(Svg& svg, StepKind kind, double x, double y) {
  const std::string fill = std::string("fill=\"") + kind_colour(kind) + "\"";
  switch (kind) {
    case StepKind::kDecodeOnly: svg.circle(x, y, 2.2, fill); break;
    case StepKind::kMixed: svg.rect(x - 3, y - 3, 6, 6, fill); break;
    case StepKind::kPrefill:
      svg.polygon({{x, y - 4.5}, {x - 4.5, y + 3.5}, {x + 4.5, y + 3.5}}, fill);
      break;
  }
}

std::string ms_text(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), ms >= 10 ? "%.0f ms" : ms >= 1 ? "%.1f ms" : "%.3f ms", ms);
  return text;
}

// A panel's plot area and its mapping of (step, ms) to the page.
struct Frame {
  double top, bottom, log_bottom, left = kLeft, right = kWidth - kRight;
  double x_max, lo, decades;

  Frame(int panel_top, const LogAxis& y, const std::vector<Tick>& x_ticks)
      : top(panel_top + kHeader),
        bottom(top + kPlotHeight),
        log_bottom(y.zero_lane ? bottom - kZeroLane : bottom),
        x_max(x_ticks.back().value),
        lo(y.lo),
        decades(std::log10(y.hi / y.lo)) {}
  // Inset from the time axis, so that a marker at step 0 is not drawn over it.
  double x(double step) const { return left + kInset + step / x_max * (right - left - kInset); }
  double y(double ms) const {
    if (ms <= 0) return bottom - 6;  // the zero lane
    return log_bottom - std::log10(ms / lo) / decades * (log_bottom - top);
  }
};

// "CPU_ATTN (cpu): 261 steps (217 decode-only, 43 mixed, 1 prefill); decode-only median 8.2 ms"
std::string panel_title(const EngineRun& run, double decode_median) {
  int counts[3] = {};
  for (const StepRecord& r : run.steps) ++counts[static_cast<int>(step_kind(r))];
  std::string title = run.backend + ": " + std::to_string(run.steps.size()) + " steps (";
  for (StepKind k : kKinds) {
    if (k != StepKind::kDecodeOnly) title += ", ";
    title += std::to_string(counts[static_cast<int>(k)]) + " " + step_kind_name(k);
  }
  title += ")";
  if (decode_median > 0) title += "; decode-only median " + ms_text(decode_median);
  return title;
}

void draw_axes(Svg& svg, const Frame& f, const LogAxis& y_axis, const std::vector<Tick>& x_ticks) {
  for (const Tick& t : y_axis.ticks) {
    svg.line(f.left, f.y(t.value), f.right, f.y(t.value),
             t.label.empty() ? "stroke=\"#f2f2f2\"" : "stroke=\"#dddddd\"");
    if (!t.label.empty()) svg.text(f.left - 6, f.y(t.value) + 4, t.label, "text-anchor=\"end\"");
  }
  if (y_axis.zero_lane) svg.text(f.left - 6, f.y(0) + 4, "0", "text-anchor=\"end\"");
  for (const Tick& t : x_ticks) {
    svg.line(f.x(t.value), f.top, f.x(t.value), f.bottom, "stroke=\"#f2f2f2\"");
    svg.line(f.x(t.value), f.bottom, f.x(t.value), f.bottom + 4, "stroke=\"#333\"");
    svg.text(f.x(t.value), f.bottom + 16, t.label, "text-anchor=\"middle\"");
  }
  // The time axis stops above the zero lane: the gap says the scale breaks there.
  svg.line(f.left, f.top, f.left, f.log_bottom, "stroke=\"#333\"");
  svg.line(f.left, f.bottom, f.right, f.bottom, "stroke=\"#333\"");
  const std::string mid = std::to_string(static_cast<int>((f.top + f.bottom) / 2));
  svg.text(22, (f.top + f.bottom) / 2, "ms per step (log scale)",
           "text-anchor=\"middle\" transform=\"rotate(-90 22 " + mid + ")\"");
}

// One backend's panel below its title; `top` is the panel's upper edge.
void draw_panel(Svg& svg, const EngineRun& run, const LogAxis& y_axis,
                const std::vector<Tick>& x_ticks, int top) {
  const Frame f(top, y_axis, x_ticks);
  std::vector<double> decode_ms;
  for (const StepRecord& r : run.steps) {
    if (r.decode_only) decode_ms.push_back(r.result.attention_ms);
  }
  const double median = quantile(decode_ms, 0.5);
  svg.text(f.left, top + 15, panel_title(run, median), "font-weight=\"bold\"");
  draw_axes(svg, f, y_axis, x_ticks);
  std::vector<std::pair<double, double>> path;
  for (const StepRecord& r : run.steps) path.emplace_back(f.x(r.step), f.y(r.result.attention_ms));
  svg.polyline(path, "stroke=\"#bbbbbb\" stroke-width=\"0.8\"");
  if (median > 0) {
    svg.line(f.left, f.y(median), f.right, f.y(median),
             "stroke=\"#4477aa\" stroke-dasharray=\"6 4\"");
  }
  // Rare kinds last, so that the many decode steps do not hide them.
  for (StepKind k : kKinds) {
    for (const StepRecord& r : run.steps) {
      if (step_kind(r) == k) marker(svg, k, f.x(r.step), f.y(r.result.attention_ms));
    }
  }
}

}  // namespace

StepKind step_kind(const StepRecord& step) {
  if (step.decode_only) return StepKind::kDecodeOnly;
  return step.num_prefill_tokens == step.num_tokens ? StepKind::kPrefill : StepKind::kMixed;
}

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kDecodeOnly: return "decode-only";
    case StepKind::kMixed: return "mixed";
    case StepKind::kPrefill: return "prefill";
  }
  return "?";
}

std::string step_time_svg(const std::vector<EngineRun>& runs, const std::string& title) {
  double min_positive = 0, max_ms = 0;
  bool has_zero = false;
  int last_step = 1;
  for (const EngineRun& run : runs) {
    for (const StepRecord& r : run.steps) {
      const double ms = r.result.attention_ms;
      has_zero = has_zero || ms <= 0;
      if (ms > 0 && (min_positive == 0 || ms < min_positive)) min_positive = ms;
      max_ms = std::max(max_ms, ms);
      last_step = std::max(last_step, r.step);
    }
  }
  const LogAxis y_axis = log_axis(min_positive, max_ms, has_zero);
  const std::vector<Tick> x_ticks = linear_ticks(last_step, 10);
  const int height = kTop + static_cast<int>(runs.size()) * kPanel + 30;
  Svg svg(kWidth, height);
  svg.text(kLeft, 26, title, "font-size=\"16\" font-weight=\"bold\"");
  double x = kLeft;
  for (StepKind k : kKinds) {
    const std::string label = std::string(step_kind_name(k)) + " step";
    marker(svg, k, x + 4, 46);
    svg.text(x + 12, 50, label, "");
    x += 36 + 6.5 * static_cast<double>(label.size());  // about 6.5 px a character at 12 px
  }
  svg.line(x, 46, x + 24, 46, "stroke=\"#4477aa\" stroke-dasharray=\"6 4\"");
  svg.text(x + 30, 50, "median of the decode-only steps", "");
  for (size_t i = 0; i < runs.size(); ++i) {
    draw_panel(svg, runs[i], y_axis, x_ticks, kTop + static_cast<int>(i) * kPanel);
  }
  svg.text((kLeft + kWidth - kRight) / 2.0, height - 12, "engine step", "text-anchor=\"middle\"");
  return svg.str();
}

Status write_step_time_plot(const std::string& path, const std::vector<EngineRun>& runs,
                            const std::string& title) {
  std::ofstream file(path);
  file << step_time_svg(runs, title);
  file.close();
  if (!file) return invalid_argument("--plot: cannot write '" + path + "'");
  return ok_status();
}

}  // namespace pagedattn::serve
