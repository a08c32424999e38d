// The checks a GPU backend makes of decode context parallelism (docs/dcp.md), before anything
// runs. Host code, built with or without CUDA.
#pragma once

#include <string_view>

#include "backends/gpu/dcp_step.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

// make_impl: check_dcp_layer's rules (dcp/layer_checks.h) and, with a dcp_group: the group's
// buffers on the layer's CUDA device, and no forced kernel generation 3 (pass (a) runs v2 for
// requests with no local context and under a window, which v3 does not serve).
Status check_dcp_impl_params(std::string_view backend, const AttentionImplParams& params);

// forward of a sharded step, or of a layer with a dcp_group of more than one rank: the step and the
// layer agree on the group, the metadata was not built for CUDA-graph capture, key and value hold
// the new tokens, and the query's heads are packed (head stride head_size), as pass (a)'s gather
// copies them. Every rank passes or fails these alike when the engine gives every rank the same
// step, except the check that the metadata's dcp_rank is the group's rank: a rank that fails it
// alone leaves the others waiting in their first collective, as with NCCL.
Status check_dcp_forward(std::string_view backend, const DcpStep& dcp, const StepInfo& step,
                         bool for_cudagraph_capture, const AttentionImplParams& params,
                         const TensorView& query, const TensorView& key, const TensorView& value);

}  // namespace pagedattn::gpu
