// serve's plot and output files: the axes' ticks and labels (0 is "0", no exponents), the step
// kinds, the SVG (text as text, a marker per step by kind, a zero lane only when needed) and the
// output-path check made before a run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "serve/output_path.h"
#include "serve/plot.h"
#include "serve/plot_axis.h"

namespace pagedattn::serve {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> labels(const std::vector<Tick>& ticks) {
  std::vector<std::string> out;
  for (const Tick& t : ticks) out.push_back(t.label);
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

StepRecord step(int index, int tokens, int prefill_tokens, double ms) {
  StepRecord r;
  r.step = index;
  r.num_tokens = tokens;
  r.num_prefill_tokens = prefill_tokens;
  r.decode_only = prefill_tokens == 0;
  r.result.attention_ms = ms;
  return r;
}

EngineRun run_of(const std::string& backend, std::vector<StepRecord> steps) {
  EngineRun run;
  run.backend = backend;
  run.steps = std::move(steps);
  return run;
}

TEST(ServePlotAxis, LabelsArePlainNumbers) {
  EXPECT_EQ(tick_label(0), "0");
  EXPECT_EQ(tick_label(0.01), "0.01");
  EXPECT_EQ(tick_label(0.5), "0.5");
  EXPECT_EQ(tick_label(20), "20");
  EXPECT_EQ(tick_label(1000), "1000");
}

TEST(ServePlotAxis, LogAxisCoversTheValuesInDecades) {
  const LogAxis wide = log_axis(0.08, 99, false);
  EXPECT_DOUBLE_EQ(wide.lo, 0.01);
  EXPECT_DOUBLE_EQ(wide.hi, 100);
  std::vector<std::string> labelled;
  for (const std::string& l : labels(wide.ticks)) {
    if (!l.empty()) labelled.push_back(l);
  }
  EXPECT_EQ(labelled, (std::vector<std::string>{"0.01", "0.1", "1", "10", "100"}));
  // Within two decades 2 and 5 are labelled too.
  EXPECT_EQ(labels(log_axis(3.8, 8, false).ticks), (std::vector<std::string>{"1", "2", "5", "10"}));
  EXPECT_TRUE(log_axis(1, 2, true).zero_lane);
}

TEST(ServePlotAxis, LinearTicksStartAtZero) {
  const std::vector<Tick> ticks = linear_ticks(261, 10);
  EXPECT_EQ(ticks.front().label, "0");
  EXPECT_DOUBLE_EQ(ticks[1].value, 50);
  EXPECT_GE(ticks.back().value, 261);
}

TEST(ServePlot, StepKinds) {
  EXPECT_EQ(step_kind(step(0, 4, 0, 1)), StepKind::kDecodeOnly);
  EXPECT_EQ(step_kind(step(0, 300, 297, 1)), StepKind::kMixed);
  EXPECT_EQ(step_kind(step(0, 300, 300, 1)), StepKind::kPrefill);
  EXPECT_STREQ(step_kind_name(StepKind::kMixed), "mixed");
}

TEST(ServePlot, SvgMarksEveryStepByKindWithTextAsText) {
  const EngineRun cpu = run_of("CPU<1>", {step(0, 500, 500, 180.0), step(1, 260, 256, 40.0),
                                          step(2, 4, 0, 0.2), step(3, 4, 0, 0.25)});
  const std::string svg = step_time_svg({cpu}, "attention time per step, tiny");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">attention time per step, tiny</text>"), std::string::npos);
  EXPECT_NE(svg.find(">CPU&lt;1&gt;: 4 steps (2 decode-only, 1 mixed, 1 prefill); decode-only "
                     "median 0.200 ms</text>"),
            std::string::npos);
  EXPECT_NE(svg.find(">decode-only step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">ms per step (log scale)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">engine step</text>"), std::string::npos);
  // Markers: one circle per decode-only step, a square per mixed step, a triangle per prefill
  // step (plus one of each in the legend).
  EXPECT_EQ(count(svg, "<circle"), 2u + 1);
  EXPECT_EQ(count(svg, "<rect x="), 1u + 1);
  EXPECT_EQ(count(svg, "<polygon"), 1u + 1);
  // The step axis starts at a "0"; the time axis is in decades, 0.1 to 1000, no zero lane.
  EXPECT_NE(svg.find("text-anchor=\"middle\">0</text>"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"end\">0.1</text>"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"end\">1000</text>"), std::string::npos);
  EXPECT_EQ(svg.find("text-anchor=\"end\">0</text>"), std::string::npos);
  EXPECT_FALSE(std::regex_search(svg, std::regex(">[0-9.]+[eE][-+]?[0-9]+<")));
}

TEST(ServePlot, StepsOfNoTimeSitInALaneLabelledZero) {
  const std::string svg =
      step_time_svg({run_of("x", {step(0, 4, 0, 0.0), step(1, 4, 0, 0.3)})}, "t");
  EXPECT_NE(svg.find("text-anchor=\"end\">0</text>"), std::string::npos);
}

TEST(ServePlot, WritesTheFile) {
  const std::string path = ::testing::TempDir() + "serve_plot_test.svg";
  ASSERT_TRUE(write_step_time_plot(path, {run_of("x", {step(0, 4, 0, 0.3)})}, "t").ok());
  std::ifstream file(path);
  std::string first;
  std::getline(file, first);
  EXPECT_EQ(first.rfind("<svg", 0), 0u);
  fs::remove(path);
}

TEST(ServeOutputPath, BadPathsAreRefusedWithTheFlagThePathAndWhy) {
  EXPECT_TRUE(check_output_file("--plot", "", ".svg").ok());
  EXPECT_EQ(check_output_file("--plot", "x.png", ".svg").message(),
            "--plot: 'x.png' does not end in .svg (allowed: a .svg file name, or '' for none)");
  EXPECT_EQ(check_output_file("--plot", "/nonexistent/x.svg", ".svg").message(),
            "--plot: cannot write '/nonexistent/x.svg': the directory '/nonexistent' does not "
            "exist");
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(check_output_file("--json", dir, "").message(),
            "--json: cannot write '" + dir + "': it is a directory");
}

TEST(ServeOutputPath, AWritablePathIsLeftAsItWas) {
  const fs::path path = fs::path(::testing::TempDir()) / "serve_output_path_test.json";
  fs::remove(path);
  ASSERT_TRUE(check_output_file("--json", path.string(), "").ok());
  EXPECT_FALSE(fs::exists(path));
  std::ofstream(path) << "kept";
  ASSERT_TRUE(check_output_file("--json", path.string(), "").ok());
  std::ifstream file(path);
  std::string content;
  file >> content;
  EXPECT_EQ(content, "kept");
  fs::remove(path);
}

TEST(ServeOutputPath, TheDefaultDirectoryIsMadeOnFirstUse) {
  const fs::path before = fs::current_path();
  const fs::path scratch = fs::path(::testing::TempDir()) / "serve_output_dir_test";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  fs::current_path(scratch);
  const Status s = check_output_file("--plot", std::string(kOutputDir) + "/serve.svg", ".svg");
  const bool made = fs::is_directory(kOutputDir);
  fs::current_path(before);
  fs::remove_all(scratch);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(made);
}

}  // namespace
}  // namespace pagedattn::serve
