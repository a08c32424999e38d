// DcpExecutor::check and output_digest: the oracle on the N = 1 run, and every rank's heads
// against it.
#include <cmath>
#include <cstdio>

#include "common/numeric.h"
#include "reference/compare.h"
#include "serve/dcp_executor.h"

namespace pagedattn::serve {

StatusOr<uint64_t> DcpExecutor::output_digest(const StepBatch& batch) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const Rank& rank : ranks_) {
    for (int l = 0; l < model_.num_layers; ++l) {
      const TensorView out = rank_output(rank, l, batch.num_tokens);
      const auto* bytes = static_cast<const unsigned char*>(out.data());
      for (int64_t i = 0; i < out.nbytes(); ++i) h = (h ^ bytes[i]) * 0x100000001B3ull;
    }
  }
  return h;
}

StatusOr<std::vector<std::string>> DcpExecutor::check(const StepBatch& batch, int layer,
                                                      std::span<const int> positions,
                                                      int max_rows) {
  PAGEDATTN_ASSIGN_OR_RETURN(std::vector<std::string> failures,
                             single_->check(batch, layer, positions, max_rows));
  const reference::Tolerance tol = reference::tolerance_for(model_.dtype);
  const TensorView want = single_->step_output(layer, batch.num_tokens);
  const int hq = model_.num_heads / dcp_.world_size, d = model_.head_size;
  for (int r = 0; r < dcp_.world_size; ++r) {
    const TensorView got = rank_output(ranks_[r], layer, batch.num_tokens);
    for (int64_t t = 0; t < batch.num_tokens; ++t) {
      for (int h = 0; h < hq; ++h) {
        for (int i = 0; i < d; ++i) {
          const double a = load_as_float(got.data(), got.dtype(), (t * hq + h) * d + i);
          const double b =
              load_as_float(want.data(), want.dtype(), (t * model_.num_heads + r * hq + h) * d + i);
          if (std::abs(a - b) <= tol.atol + tol.rtol * std::abs(b)) continue;
          char text[200];
          std::snprintf(text, sizeof(text),
                        "rank %d differs from N = 1 on layer %d, token %lld, head %d, dim %d: "
                        "%.6g vs %.6g",
                        r, layer, static_cast<long long>(t), r * hq + h, i, a, b);
          failures.emplace_back(text);
          return failures;
        }
      }
    }
  }
  return failures;
}

}  // namespace pagedattn::serve
