// The forward side of decode context parallelism for any GPU backend (dcp_step.h): the sequence of
// CPU_ATTN's dcp_forward.cc on the layer's stream. The backend supplies its paged-kernel launcher;
// this file owns the sequence, what each pass reads and where it writes. The group's collectives
// (the query's all-gather and the combine) go through the layer's dcp_group on the same stream.
#pragma once

#include "backends/gpu/dcp_step.h"
#include "kernels/attention/paged_attention.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

// The steps, in order (dcp_forward_cuda.cc; CUDA builds).
// This rank's query rows packed, all-gathered, and laid out as the group's query [T, N Hq, D].
Status gather_group_query(const DcpStep& dcp, const AttentionImplParams& layer,
                          const TensorView& query, StreamHandle stream);
// Pass (a)'s launch: `layer_launch` (the layer's paged launch over its cache) reading the group's
// query and writing the partials, without sinks.
kernels::PagedAttentionParams context_pass_launch(
    const DcpStep& dcp, const kernels::PagedAttentionParams& layer_launch);
// (b): dcp_combine of the partials into this rank's heads, by the layer's dcp_comm_backend.
Status combine_context(const DcpStep& dcp, const AttentionImplParams& layer, StreamHandle stream);
// The new tokens written into the staging scratch in the cache's format (as the cache write
// encodes them, so that FP8 and 16-bit caches read them as N = 1 reads them from its cache).
Status stage_new_tokens(const DcpStep& dcp, const AttentionImplParams& layer, const TensorView& key,
                        const TensorView& value, const KVScales& scales, StreamHandle stream);
// Pass (c)'s launch: `layer_launch` reading the staged tokens of this rank's KV heads, with the
// layer's sinks (they join here only: once per head).
kernels::PagedAttentionParams own_pass_launch(const DcpStep& dcp, const AttentionImplParams& layer,
                                              const kernels::PagedAttentionParams& layer_launch,
                                              const float* sinks);
// (d): merge_attn_states of (b) and (c) into the caller's output rows and LSE (if defined).
Status merge_passes(const DcpStep& dcp, const AttentionImplParams& layer, const TensorView& output,
                    const TensorView& output_lse, StreamHandle stream);

// The whole forward of a sharded step, after check_dcp_forward. launch_pass(PagedAttentionParams,
// const PassMetadata&) -> Status completes a launch with the pass's metadata and runs it;
// layer_launch is the layer's paged launch (query, cache, scales, output strides, num_tokens =
// dcp.num_tokens), sinks the layer's on the device (or null).
template <typename LaunchPass>
Status run_dcp_forward(const DcpStep& dcp, const AttentionImplParams& layer,
                       const kernels::PagedAttentionParams& layer_launch, const float* sinks,
                       const TensorView& query, const TensorView& key, const TensorView& value,
                       const KVScales& scales, const TensorView& output,
                       const TensorView& output_lse, LaunchPass&& launch_pass,
                       StreamHandle stream) {
  if (dcp.num_tokens == 0) return ok_status();  // the same step on every rank: all return here
  PAGEDATTN_RETURN_IF_ERROR(gather_group_query(dcp, layer, query, stream));
  PAGEDATTN_RETURN_IF_ERROR(launch_pass(context_pass_launch(dcp, layer_launch), dcp.context));
  PAGEDATTN_RETURN_IF_ERROR(combine_context(dcp, layer, stream));
  PAGEDATTN_RETURN_IF_ERROR(stage_new_tokens(dcp, layer, key, value, scales, stream));
  PAGEDATTN_RETURN_IF_ERROR(launch_pass(own_pass_launch(dcp, layer, layer_launch, sinks), dcp.own));
  return merge_passes(dcp, layer, output, output_lse, stream);
}

}  // namespace pagedattn::gpu
