// The start every GPU builder's build() shares (CUDA builds: include from *_cuda.cc files).
#pragma once

#include <memory>

#include "backends/gpu/checks.h"
#include "backends/gpu/dcp_builder.h"
#include "backends/gpu/pass_plan.h"
#include "backends/gpu/step_buffers.h"

namespace pagedattn::gpu {

// The step checked, the metadata's step and split workspace filled, and a step sharded by decode
// context parallelism planned whole by `dcp` (then md->dcp.enabled: nothing else to plan).
template <typename Metadata>
StatusOr<std::unique_ptr<Metadata>> start_build(const BuilderParams& params,
                                                const SplitWorkspace& split, DcpBuilder& dcp,
                                                int common_prefix_len,
                                                const CommonAttentionMetadata& meta) {
  PAGEDATTN_RETURN_IF_ERROR(check_step(params, meta));
  auto md = std::make_unique<Metadata>();
  md->step = step_info(params, meta);
  md->split = split.view();
  if (meta.dcp_world_size > 1) {
    PAGEDATTN_ASSIGN_OR_RETURN(md->dcp, dcp.plan(common_prefix_len, meta, step_lengths(meta)));
  }
  return md;
}

}  // namespace pagedattn::gpu
