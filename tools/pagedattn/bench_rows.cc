#include "bench_rows.h"

#include <cstdio>
#include <map>

namespace pagedattn::cli {
namespace {

// One decimal for small rates (CPU), none for large ones (GPU).
std::string rate(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), x >= 1000.0 ? "%.0f" : "%.1f", x);
  return text;
}

// "42%", or "-" when the ceiling could not be measured.
std::string percent(double value, double ceiling) {
  if (ceiling <= 0.0) return "-";
  char text[16];
  std::snprintf(text, sizeof(text), "%.0f%%", 100.0 * value / ceiling);
  return text;
}

const char* measure_name(Measure m) {
  return m == Measure::kLaunch ? "launch" : m == Measure::kBuild ? "build" : "forward";
}

// What every row says about its case and variant.
nlohmann::json row_identity(const Row& r) {
  const testing::CaseSpec& s = r.bench_case.spec;
  const CaseShape shape = case_shape(s);
  return {{"case", s.name},
          {"measure", measure_name(r.bench_case.measure)},
          {"kind", shape.kind},
          {"B", shape.batch},
          {"S", shape.seq},
          {"Hq", shape.num_heads},
          {"Hkv", shape.num_kv_heads},
          {"D", shape.head_size},
          {"causal", s.causal},
          {"block_size", s.block_size},
          {"dtype", std::string(dtype_name(s.dtype))},
          {"kv_cache_dtype", std::string(kv_cache_dtype_name(s.kv_cache_dtype))},
          {"part_of", r.bench_case.part_of},
          {"variant", r.variant},
          {"backend", r.backend},
          {"backend_label", r.label},
          {"generation", r.generation}};
}

}  // namespace

void print_header(const std::string& device, const Ceilings& c) {
  std::printf("device: %s\n", device.c_str());
  std::printf("ceilings: read bandwidth %s\n", describe_ceiling(c.bandwidth, "GB/s").c_str());
  std::printf("          compute %s\n", describe_ceiling(c.compute, "GFLOP/s").c_str());
  if (c.paged_read.value > 0.0) {
    std::printf("          paged read %s\n", describe_ceiling(c.paged_read, "GB/s").c_str());
  }
  std::printf("%-34s %-24s %7s %4s %10s %10s %6s %9s %6s\n", "case", "backend", "tokens", "blk",
              "median ms", "GFLOP/s", "%peak", "KV GB/s", "%bw");
  std::fflush(stdout);
}

nlohmann::json report_row(const Row& r, const Ceilings& c) {
  const CaseWork work = case_work(r.bench_case.spec);
  nlohmann::json j = row_identity(r);
  j["tokens"] = work.tokens;
  const char* name = r.bench_case.spec.name.c_str();
  const std::string label = r.label.empty() ? r.variant : r.label;
  std::printf("%-34s %-24s %7lld %4d ", name, label.c_str(), static_cast<long long>(work.tokens),
              r.bench_case.spec.block_size);
  if (!r.error.empty()) {
    std::printf("error: %s\n", r.error.c_str());
    std::fflush(stdout);
    j["error"] = r.error;
    return j;
  }
  if (r.launch) {
    const LaunchCost& l = *r.launch;
    std::printf("host %.2f us/forward, device %.2f us (%d calls), free-running %.2f us%s%s\n",
                l.host_us, l.device_us, l.calls, l.wall_us, l.host_bound() ? "" : " [device-bound]",
                l.held ? "" : " [the device was not held to the end]");
    j.update({{"calls", l.calls},
              {"free_calls", l.free_calls},
              {"host_us_per_forward", l.host_us},
              {"device_us_per_forward", l.device_us},
              {"wall_us_per_forward", l.wall_us},
              {"device_held", l.held},
              {"host_bound", l.host_bound()}});
  } else if (!r.build_us.empty()) {
    const double us = median(r.build_us);
    std::printf("build() %.2f us host (median of %zu)\n", us, r.build_us.size());
    j.update({{"build_us", us}, {"build_times_us", r.build_us}});
  } else {
    const double ms = median(r.times_ms), seconds = ms * 1e-3;
    const double gflops = work.flops / seconds / 1e9, gbps = work.kv_bytes / seconds / 1e9;
    std::printf("%10.3f %10s %6s %9.1f %6s\n", ms, rate(gflops).c_str(),
                percent(gflops, c.compute.value).c_str(), gbps,
                percent(gbps, c.bandwidth.value).c_str());
    j.update({{"flops", work.flops},
              {"kv_bytes", work.kv_bytes},
              {"median_ms", ms},
              {"times_ms", r.times_ms},
              {"gflops", gflops},
              {"tflops", gflops / 1e3},
              {"kv_gbps", gbps},
              {"ceiling_gflops", c.compute.value},
              {"ceiling_gbps", c.bandwidth.value},
              {"fraction_of_compute", c.compute.value > 0 ? gflops / c.compute.value : 0.0},
              {"fraction_of_bandwidth", c.bandwidth.value > 0 ? gbps / c.bandwidth.value : 0.0}});
  }
  std::fflush(stdout);
  return j;
}

nlohmann::json report_part_ratios(const std::vector<Row>& rows) {
  struct Sum {
    const Row* batch = nullptr;
    double parts_ms = 0.0;
    nlohmann::json parts = nlohmann::json::object();
    bool complete = true;
  };
  // Keyed by (batch name, variant, block size).
  std::map<std::string, Sum> sums;
  auto key = [](const std::string& batch, const Row& r) {
    return batch + "|" + r.variant + "|" + std::to_string(r.bench_case.spec.block_size);
  };
  for (const Row& r : rows) {
    if (r.bench_case.measure != Measure::kForward) continue;
    const std::string& part_of = r.bench_case.part_of;
    Sum& sum = sums[key(part_of.empty() ? r.bench_case.spec.name : part_of, r)];
    if (part_of.empty()) {
      sum.batch = &r;
      continue;
    }
    if (!r.error.empty()) sum.complete = false;
    const double ms = median(r.times_ms);
    sum.parts_ms += ms;
    sum.parts[r.bench_case.spec.name] = ms;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [k, sum] : sums) {
    if (sum.batch == nullptr || sum.parts.empty()) continue;
    if (!sum.complete || !sum.batch->error.empty()) continue;
    const Row& b = *sum.batch;
    const double ms = median(b.times_ms), ratio = ms / sum.parts_ms;
    std::printf("%s on %s: %.3f ms together / %.3f ms for its parts alone (",
                b.bench_case.spec.name.c_str(), b.label.c_str(), ms, sum.parts_ms);
    bool first = true;
    for (const auto& [part, part_ms] : sum.parts.items()) {
      std::printf("%s%s %.3f", first ? "" : " + ", part.c_str(), part_ms.get<double>());
      first = false;
    }
    std::printf(") = %.3f\n", ratio);
    out.push_back({{"batch", b.bench_case.spec.name},
                   {"variant", b.variant},
                   {"backend_label", b.label},
                   {"block_size", b.bench_case.spec.block_size},
                   {"batch_ms", ms},
                   {"parts_ms", sum.parts},
                   {"ratio", ratio}});
  }
  std::fflush(stdout);
  return out;
}

}  // namespace pagedattn::cli
