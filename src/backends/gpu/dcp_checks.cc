// The GPU backends' DCP checks (dcp_checks.h): host code reading devices, shapes and the group.
#include "backends/gpu/dcp_checks.h"

#include <string>

#include "backends/gpu/checks.h"
#include "dcp/layer_checks.h"
#include "pagedattn/communicator.h"

namespace pagedattn::gpu {
namespace {

std::string with_group(const AttentionImplParams& p) {
  return " with a dcp_group of world size " + std::to_string(p.dcp_group->world_size());
}

}  // namespace

Status check_dcp_impl_params(std::string_view backend, const AttentionImplParams& p) {
  const std::string where = std::string(backend) + " impl: ";
  if (Status s = dcp::check_dcp_layer(p); !s.ok()) return invalid_argument(where + s.message());
  if (p.dcp_group == nullptr) return ok_status();
  const Device group_device = p.dcp_group->device();
  if (group_device != p.device) {
    return invalid_argument(where + "dcp_group's buffers live on " + device_name(group_device) +
                            "; the layer runs on " + device_name(p.device) +
                            " (allowed: a communicator on the layer's device, such as NCCL's or "
                            "dcp::make_in_process_group's)");
  }
  if (p.kernel_generation == 3) {
    return invalid_argument(where + "kernel_generation = 3" + with_group(p) +
                            ": the context pass runs v2 for requests this rank stores no context "
                            "of, which v3 does not serve (allowed: 0 or 2)");
  }
  return ok_status();
}

Status check_dcp_forward(std::string_view backend, const DcpStep& dcp, const StepInfo& step,
                         bool for_cudagraph_capture, const AttentionImplParams& p,
                         const TensorView& query, const TensorView& key, const TensorView& value) {
  const std::string where = std::string(backend) + " forward: ";
  if (p.dcp_group == nullptr) {
    return invalid_argument(where + "metadata is dcp_rank " + std::to_string(dcp.shard.rank) +
                            " of dcp_world_size " + std::to_string(dcp.shard.world_size) +
                            " but the layer has no dcp_group (allowed: dcp_world_size 1 without "
                            "a group)");
  }
  const Communicator& group = *p.dcp_group;
  if (!dcp.enabled) {
    return invalid_argument(where +
                            "metadata is not sharded (dcp_world_size 1) but the layer's "
                            "dcp_group has " +
                            std::to_string(group.world_size()) +
                            " ranks (allowed: a step passed through shard_step)");
  }
  if (dcp.shard.world_size != group.world_size() || dcp.shard.rank != group.rank()) {
    return invalid_argument(where + "metadata is dcp_rank " + std::to_string(dcp.shard.rank) +
                            " of dcp_world_size " + std::to_string(dcp.shard.world_size) +
                            "; the layer's dcp_group is rank " + std::to_string(group.rank()) +
                            " of " + std::to_string(group.world_size()) + " (they must agree)");
  }
  if (for_cudagraph_capture) {
    return unimplemented(where + "metadata built for CUDA-graph capture" +
                         " with dcp_world_size = " + std::to_string(dcp.shard.world_size) +
                         ": a sharded step's collectives are sized by its real token count, "
                         "which a replay may change (allowed: eager forward under DCP)");
  }
  PAGEDATTN_RETURN_IF_ERROR(check_new_tokens(p, step, key, value));
  if (query.size(1) > 1 && query.stride(1) != p.head_size) {
    return invalid_argument(where + "query is " + query.describe() +
                            "; under DCP its heads must be packed (head stride " +
                            std::to_string(p.head_size) + "): the query gather copies whole rows");
  }
  return ok_status();
}

}  // namespace pagedattn::gpu
