// The requests a serve run replays: arrival step, prompt and output lengths, and whether the prompt
// starts with the shared system prompt. Either generated (Poisson arrivals, length distributions
// given as text) or read from a JSON trace. Steps are the clock, so a seed fixes the whole run.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pagedattn/status.h"

namespace pagedattn::serve {

struct RequestSpec {
  int id = 0;
  int arrival_step = 0;
  int prompt_len = 1;
  int output_len = 1;
  bool shared_prefix = false;  // the prompt begins with the workload's shared prefix
};

// "N" (constant), "uniform:LO:HI" (inclusive) or "exp:MEAN" (exponential, at least 1).
class LengthDistribution {
 public:
  static StatusOr<LengthDistribution> parse(const std::string& text, const std::string& what);
  int sample(std::mt19937_64& rng) const;

 private:
  enum class Kind { kConstant, kUniform, kExponential };
  Kind kind_ = Kind::kConstant;
  double a_ = 1, b_ = 1;
};

struct WorkloadConfig {
  int num_requests = 64;
  double arrival_rate = 1.0;  // mean new requests per step (Poisson); <= 0 = all at step 0
  std::string prompt_lens = "uniform:32:512";
  std::string output_lens = "uniform:16:128";
  int shared_prefix_len = 256;       // tokens of the shared system prompt
  double shared_prefix_share = 1.0;  // share of requests that start with it
  uint64_t seed = 1;
};

struct Workload {
  std::vector<RequestSpec> requests;  // by arrival
  int shared_prefix_len = 0;
  std::string description;
};

// Lengths are clamped so that prompt + output fits max_model_len.
StatusOr<Workload> generate_workload(const WorkloadConfig& config, int max_model_len);
// {"shared_prefix_len": 256, "requests": [{"arrival": 0, "prompt_len": 300, "output_len": 40,
//  "shared_prefix": true}, ...]}; unknown fields and bad values are errors naming them.
StatusOr<Workload> load_trace(const std::string& path, int max_model_len);

// Token ids of a request's prompt: the shared prefix (the same ids for every request) and then
// ids of its own; and of the token it "samples" at a position. Deterministic in (seed, id).
std::vector<int32_t> prompt_tokens(const RequestSpec& request, int shared_prefix_len,
                                   uint64_t seed);
int32_t sampled_token(uint64_t seed, int request_id, int position);

}  // namespace pagedattn::serve
