#include "plan/workspace.h"

#include <algorithm>

namespace pagedattn::plan {
namespace {

int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

WorkspaceLayout workspace_layout(const WorkspaceLimits& limits) {
  WorkspaceLayout l;
  const int max_decode_tokens =
      std::min(limits.max_num_tokens, limits.max_num_reqs * kMaxDecodeQueryLen);
  l.decode = decode_plan_limits(limits.decode, limits.max_num_reqs, max_decode_tokens,
                                limits.max_model_len);
  const int64_t reqs = limits.max_num_reqs;
  l.prefill_cu_offset = 0;
  l.prefill_splits_offset = l.prefill_cu_offset + align16(4 * (reqs + 1));
  l.pass_requests_offset = l.prefill_splits_offset + align16(4 * reqs);
  l.kv_indptr_offset = l.pass_requests_offset + align16(4 * reqs);
  l.last_page_len_offset = l.kv_indptr_offset + align16(4 * (reqs + 1));
  l.decode_plan_offset = l.last_page_len_offset + align16(4 * reqs);
  l.int_bytes = l.decode_plan_offset + l.decode.plan_bytes;
  l.partial_out_floats = std::max<int64_t>(1, l.decode.max_partial_rows) * limits.head_size;
  l.partial_lse_floats = std::max<int64_t>(1, l.decode.max_partial_rows);
  return l;
}

}  // namespace pagedattn::plan
