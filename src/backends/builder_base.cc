#include "backends/builder_base.h"

namespace pagedattn::backends {

bool BuilderBase::use_cascade_attention(int common_prefix_len, std::span<const int32_t> query_lens,
                                        int num_query_heads, int num_kv_heads, bool use_alibi,
                                        bool use_sliding_window, bool use_local_attention,
                                        int num_sms, int dcp_world_size) const {
  return !params_.deterministic &&
         AttentionMetadataBuilder::use_cascade_attention(
             common_prefix_len, query_lens, num_query_heads, num_kv_heads, use_alibi,
             use_sliding_window, use_local_attention, num_sms, dcp_world_size);
}

}  // namespace pagedattn::backends
