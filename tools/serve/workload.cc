// Workload generation and JSON traces.
#include "serve/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "testing/case_json.h"

namespace pagedattn::serve {
namespace {

constexpr int kVocabSize = 128000;
constexpr size_t kMaxTraceBytes = size_t{64} << 20;  // a million requests' worth

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Status clamp_lengths(RequestSpec& r, int shared_prefix_len, int max_model_len) {
  if (r.shared_prefix) r.prompt_len = std::max(r.prompt_len, shared_prefix_len + 1);
  r.prompt_len = std::min(r.prompt_len, max_model_len - 1);
  r.output_len = std::clamp(r.output_len, 1, max_model_len - r.prompt_len);
  if (r.shared_prefix && r.prompt_len <= shared_prefix_len) {
    return invalid_argument(
        "shared_prefix_len = " + std::to_string(shared_prefix_len) +
        " leaves no room for a prompt under max_model_len = " + std::to_string(max_model_len));
  }
  return ok_status();
}

}  // namespace

StatusOr<LengthDistribution> LengthDistribution::parse(const std::string& text,
                                                       const std::string& what) {
  LengthDistribution d;
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  auto number = [&](const std::string& s, double& out) {
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end && *end == '\0' && out >= 1;
  };
  bool good = false;
  if (parts.size() == 1) {
    d.kind_ = Kind::kConstant;
    good = number(parts[0], d.a_);
  } else if (parts.size() == 3 && parts[0] == "uniform") {
    d.kind_ = Kind::kUniform;
    good = number(parts[1], d.a_) && number(parts[2], d.b_) && d.a_ <= d.b_;
  } else if (parts.size() == 2 && parts[0] == "exp") {
    d.kind_ = Kind::kExponential;
    good = number(parts[1], d.a_);
  }
  if (!good) {
    return invalid_argument(what + " = '" + text +
                            "'; allowed: N, uniform:LO:HI (1 <= LO <= HI) or exp:MEAN (MEAN >= 1)");
  }
  return d;
}

int LengthDistribution::sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kConstant: return static_cast<int>(a_);
    case Kind::kUniform:
      return static_cast<int>(a_) + static_cast<int>(rng() % static_cast<uint64_t>(b_ - a_ + 1));
    case Kind::kExponential: {
      const double u = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
      return std::max(1, static_cast<int>(std::lround(-a_ * std::log(u))));
    }
  }
  return 1;
}

StatusOr<Workload> generate_workload(const WorkloadConfig& c, int max_model_len) {
  PAGEDATTN_ASSIGN_OR_RETURN(LengthDistribution prompts,
                             LengthDistribution::parse(c.prompt_lens, "prompt_lens"));
  PAGEDATTN_ASSIGN_OR_RETURN(LengthDistribution outputs,
                             LengthDistribution::parse(c.output_lens, "output_lens"));
  if (c.num_requests < 1) {
    return invalid_argument("num_requests = " + std::to_string(c.num_requests) + " must be >= 1");
  }
  if (c.shared_prefix_share < 0 || c.shared_prefix_share > 1 || c.shared_prefix_len < 0) {
    return invalid_argument("shared prefix: share must be in [0, 1] and length >= 0");
  }
  std::mt19937_64 rng(c.seed);
  Workload w;
  w.shared_prefix_len = c.shared_prefix_share > 0 ? c.shared_prefix_len : 0;
  double clock = 0.0;
  for (int i = 0; i < c.num_requests; ++i) {
    RequestSpec r;
    r.id = i;
    if (c.arrival_rate > 0 && i > 0) {
      const double u = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
      clock += -std::log(u) / c.arrival_rate;  // exponential gaps: Poisson arrivals
    }
    r.arrival_step = static_cast<int>(clock);
    r.prompt_len = prompts.sample(rng);
    r.output_len = outputs.sample(rng);
    r.shared_prefix = w.shared_prefix_len > 0 &&
                      static_cast<double>(rng() >> 11) * 0x1.0p-53 < c.shared_prefix_share;
    if (r.shared_prefix) r.prompt_len += w.shared_prefix_len;
    PAGEDATTN_RETURN_IF_ERROR(clamp_lengths(r, w.shared_prefix_len, max_model_len));
    w.requests.push_back(r);
  }
  char arrivals[64] = "all at step 0";
  if (c.arrival_rate > 0)
    std::snprintf(arrivals, sizeof(arrivals), "Poisson %.2f/step", c.arrival_rate);
  char text[320];
  std::snprintf(text, sizeof(text),
                "%d requests, %s, prompt %s (after a %d-token shared prefix in %.0f%% of them), "
                "output %s, seed %llu",
                c.num_requests, arrivals, c.prompt_lens.c_str(), w.shared_prefix_len,
                100.0 * c.shared_prefix_share, c.output_lens.c_str(),
                static_cast<unsigned long long>(c.seed));
  w.description = text;
  return w;
}

StatusOr<Workload> load_trace(const std::string& path, int max_model_len) {
  namespace cj = testing::case_json;
  PAGEDATTN_ASSIGN_OR_RETURN(const std::string text,
                             cj::read_text_file(path, "trace", kMaxTraceBytes));
  const std::string where = "trace '" + path + "': ";
  StatusOr<nlohmann::json> parsed = cj::parse_json_strictly(text);
  if (!parsed.ok()) return invalid_argument(where + parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return invalid_argument(where + "not a JSON object");
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  for (const auto& [key, value] : j.items()) {
    if (key != "shared_prefix_len" && key != "requests")
      return invalid_argument(where + "unknown field '" + key +
                              "'; allowed: shared_prefix_len, requests");
  }
  Workload w;
  if (j.contains("shared_prefix_len")) {
    if (!cj::integer_in(j["shared_prefix_len"], 0, kIntMax))
      return invalid_argument(where + "'shared_prefix_len' must be an integer in [0, 2^31 - 1]");
    w.shared_prefix_len = j["shared_prefix_len"].get<int>();
  }
  if (!j.contains("requests") || !j["requests"].is_array() || j["requests"].empty())
    return invalid_argument(where + "'requests' must be a non-empty array");
  for (const nlohmann::json& item : j["requests"]) {
    RequestSpec r;
    r.id = static_cast<int>(w.requests.size());
    const std::string at = where + "request " + std::to_string(r.id) + ": ";
    if (!item.is_object()) return invalid_argument(at + "must be an object");
    for (const auto& [key, value] : item.items()) {
      if (key == "shared_prefix") {
        if (!value.is_boolean())
          return invalid_argument(at + "'shared_prefix' must be true or false");
        r.shared_prefix = value.get<bool>();
        continue;
      }
      int* field = key == "arrival"      ? &r.arrival_step
                   : key == "prompt_len" ? &r.prompt_len
                   : key == "output_len" ? &r.output_len
                                         : nullptr;
      if (field == nullptr) {
        return invalid_argument(at + "unknown field '" + key +
                                "'; allowed: arrival, prompt_len, output_len, shared_prefix");
      }
      if (!cj::integer_in(value, key == "arrival" ? 0 : 1, kIntMax))
        return invalid_argument(at + "'" + key + "' must be an integer in [" +
                                (key == "arrival" ? "0" : "1") + ", 2^31 - 1]");
      *field = value.get<int>();
    }
    if (r.shared_prefix && w.shared_prefix_len == 0)
      return invalid_argument(at + "'shared_prefix' is set but shared_prefix_len is 0");
    PAGEDATTN_RETURN_IF_ERROR(clamp_lengths(r, w.shared_prefix_len, max_model_len));
    w.requests.push_back(r);
  }
  std::stable_sort(
      w.requests.begin(), w.requests.end(),
      [](const RequestSpec& a, const RequestSpec& b) { return a.arrival_step < b.arrival_step; });
  w.description = std::to_string(w.requests.size()) + " requests from " + path;
  return w;
}

std::vector<int32_t> prompt_tokens(const RequestSpec& request, int shared_prefix_len,
                                   uint64_t seed) {
  std::vector<int32_t> tokens(static_cast<size_t>(request.prompt_len));
  for (int p = 0; p < request.prompt_len; ++p) {
    const bool shared = request.shared_prefix && p < shared_prefix_len;
    const uint64_t owner = shared ? 0xFFFFFFFFull : static_cast<uint64_t>(request.id);
    tokens[p] = static_cast<int32_t>(mix(seed ^ mix(owner * 1000003 + p)) % kVocabSize);
  }
  return tokens;
}

int32_t sampled_token(uint64_t seed, int request_id, int position) {
  return static_cast<int32_t>(
      mix(~seed ^ mix(static_cast<uint64_t>(request_id) * 7919 + position)) % kVocabSize);
}

}  // namespace pagedattn::serve
