#include "backends/query_checks.h"

#include <string>

namespace pagedattn::backends {

DType forward_query_dtype(const AttentionImplParams& layer, const TensorView& query) {
  return query.defined() && query.dtype() == DType::kFP8E4M3 ? DType::kFP8E4M3 : layer.dtype;
}

Status check_query_scale(const AttentionImplParams& layer, const TensorView& query,
                         const TensorView& q_scale, int num_reqs) {
  if (!q_scale.defined()) return ok_status();
  if (!query.defined() || query.dtype() != DType::kFP8E4M3) {
    return invalid_argument("q_scale " + q_scale.describe() +
                            " scales an fp8_e4m3 query; the query is " +
                            (query.defined() ? std::string(dtype_name(query.dtype())) : "missing"));
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(q_scale, "q_scale", {DType::kF32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(q_scale, "q_scale", layer.device));
  const bool per_tensor = q_scale.rank() == 1 && q_scale.size(0) == 1;
  const bool per_request =
      q_scale.rank() == 2 && q_scale.size(0) == num_reqs && q_scale.size(1) == layer.num_kv_heads;
  if (!per_tensor && !per_request) {
    return invalid_argument(
        "q_scale is " + q_scale.describe() + "; allowed: [1] or [num_reqs, num_kv_heads] = [" +
        std::to_string(num_reqs) + ", " + std::to_string(layer.num_kv_heads) + "] float32");
  }
  return ok_status();
}

}  // namespace pagedattn::backends
