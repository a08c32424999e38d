// The float rows of a pass redirected for a merge, and the merge stored into the output.
#include "backends/cpu/output_rows.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/thread_pool.h"
#include "common/lse_merge.h"

namespace pagedattn::cpu {

void redirect_to_float_rows(AttentionPass& pass, float* out, float* lse, int64_t num_tokens) {
  pass.output = out;
  pass.output_dtype = DType::kF32;
  pass.o_token_stride = static_cast<int64_t>(pass.num_heads) * pass.head_size;
  pass.o_head_stride = pass.head_size;
  pass.lse = lse;
  pass.lse_head_stride = num_tokens;
  pass.lse_token_stride = 1;
}

void store_merged_rows(FloatRows prefix, FloatRows suffix, int64_t num_tokens, int64_t heads,
                       int64_t dim, const TensorView& output, const TensorView& output_lse) {
  constexpr int64_t kTokensPerItem = 16;  // enough rows per item to pay for handing it out
  parallel_for((num_tokens + kTokensPerItem - 1) / kTokensPerItem, [&](int64_t item) {
    thread_local std::vector<float> row;  // the worker's own
    row.resize(dim);
    const int64_t end = std::min(num_tokens, (item + 1) * kTokensPerItem);
    for (int64_t t = item * kTokensPerItem; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const LseMerge w =
            merge_lse(prefix.lse[h * num_tokens + t], suffix.lse[h * num_tokens + t]);
        const float* p = &prefix.rows[(t * heads + h) * dim];
        const float* s = &suffix.rows[(t * heads + h) * dim];
        // A zero weight must not turn a non-finite value on the other side into NaN; the sums
        // start from +0 as merge_attn_states's do.
        if (w.suffix_weight == 0.0f) {
          for (int64_t d = 0; d < dim; ++d) row[d] = 0.0f + w.prefix_weight * p[d];
        } else if (w.prefix_weight == 0.0f) {
          for (int64_t d = 0; d < dim; ++d) row[d] = 0.0f + w.suffix_weight * s[d];
        } else {
          for (int64_t d = 0; d < dim; ++d) {
            row[d] = (0.0f + w.prefix_weight * p[d]) + w.suffix_weight * s[d];
          }
        }
        store_output_row(row.data(), static_cast<int>(dim), 1.0f, output.dtype(), output.data(),
                         t * output.stride(0) + h * output.stride(1));
        if (output_lse.defined()) {
          output_lse.data_as<float>()[h * output_lse.stride(0) + t * output_lse.stride(1)] = w.lse;
        }
      }
    }
  });
}

}  // namespace pagedattn::cpu
