// AttentionMetadataBuilder's shared members: the one cascade rule and the capture build.
#include "pagedattn/backend.h"
#include "pagedattn/ops.h"

namespace pagedattn {

StatusOr<std::unique_ptr<AttentionMetadata>> AttentionMetadataBuilder::build_for_cudagraph_capture(
    const CommonAttentionMetadata& meta) {
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionMetadata> metadata, build(0, meta));
  metadata->for_cudagraph_capture = true;
  return metadata;
}

bool AttentionMetadataBuilder::use_cascade_attention(int common_prefix_len,
                                                     std::span<const int32_t> query_lens,
                                                     int num_query_heads, int num_kv_heads,
                                                     bool use_alibi, bool use_sliding_window,
                                                     bool use_local_attention, int num_sms,
                                                     int dcp_world_size) const {
  return cascade_attention_pays_off(common_prefix_len, query_lens, num_query_heads, num_kv_heads,
                                    use_alibi, use_sliding_window, use_local_attention, num_sms,
                                    dcp_world_size);
}

}  // namespace pagedattn
