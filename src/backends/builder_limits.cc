#include "backends/builder_limits.h"

#include <string>

namespace pagedattn::backends {
namespace {

Status exceeds(std::string_view step_field, int value, std::string_view limit, int allowed) {
  return invalid_argument(std::string(step_field) + " = " + std::to_string(value) +
                          " exceeds the builder's " + std::string(limit) + " = " +
                          std::to_string(allowed));
}

}  // namespace

Status check_limits(const BuilderParams& params) {
  for (const auto& [limit, value] : {std::pair{"max_num_reqs", params.max_num_reqs},
                                     std::pair{"max_num_tokens", params.max_num_tokens},
                                     std::pair{"max_model_len", params.max_model_len}}) {
    if (value <= 0) {
      return invalid_argument(std::string(limit) + " = " + std::to_string(value) +
                              " must be positive");
    }
  }
  if (params.max_num_splits < 0) {
    return invalid_argument("max_num_splits = " + std::to_string(params.max_num_splits) +
                            " (allowed: 0 = the backend decides, or a positive bound)");
  }
  return ok_status();
}

Status check_step_limits(const BuilderParams& params, const CommonAttentionMetadata& meta) {
  if (meta.num_reqs > params.max_num_reqs) {
    return exceeds("num_reqs", meta.num_reqs, "max_num_reqs", params.max_num_reqs);
  }
  if (meta.num_actual_tokens > params.max_num_tokens) {
    return exceeds("num_actual_tokens", meta.num_actual_tokens, "max_num_tokens",
                   params.max_num_tokens);
  }
  if (meta.max_seq_len > params.max_model_len) {
    return exceeds("max_seq_len", meta.max_seq_len, "max_model_len", params.max_model_len);
  }
  return ok_status();
}

}  // namespace pagedattn::backends
