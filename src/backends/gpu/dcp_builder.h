// The builder side of decode context parallelism for any GPU backend (dcp_step.h): a sharded
// step's host plan, its upload, and the persistent buffers forward's passes use. Needs the CUDA
// runtime (include from *_cuda.cc files).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/gpu/dcp_step.h"
#include "backends/gpu/pass_plan.h"
#include "backends/gpu/step_buffers.h"
#include "runtime/device_buffer.h"

namespace pagedattn::gpu {

class DcpBuilder {
 public:
  DcpBuilder(std::string backend, const BuilderParams& params, int num_sms)
      : backend_(std::move(backend)), params_(params), num_sms_(num_sms) {}

  // The plan of a step with meta.dcp_world_size > 1 (meta validated): the local context lengths
  // (dcp_local_length of seq_len - query_len, vLLM's dcp_context_kv_lens), pass (a)'s split
  // schedule, the staging pages of pass (c); uploaded on the legacy default stream, as the GPU
  // layer's other step buffers (step_buffers.h says what that orders). The buffers are allocated
  // on the first sharded step and again when the group's size changes. Refuses a shared prefix
  // (no cascade under DCP, as vLLM) and heads that do not split over the group.
  StatusOr<DcpStep> plan(int common_prefix_len, const CommonAttentionMetadata& meta,
                         const StepLengths& lengths);

 private:
  Status ensure_buffers(int world_size);
  // This builder's layer as pass (a) sees it: the group's heads.
  BuilderParams group_params() const;

  std::string backend_;
  BuilderParams params_;
  int num_sms_ = 0;
  int world_size_ = 0;         // the group size the buffers were allocated for (0: none yet)
  int pages_per_request_ = 0;  // staging pages one request may need: its rows of the page table
  plan::SplitWorkspaceLayout context_layout_;
  SplitWorkspace context_split_;
  // Device ints: local context lengths, (a)'s split counts, query lengths [max_num_reqs] each,
  // then (c)'s page table [num_reqs, stride of this step]; and staged_slots [max_num_tokens].
  runtime::DeviceBuffer ints_, slots_;
  runtime::DeviceBuffer staged_k_, staged_v_;
  runtime::DeviceBuffer query_packed_and_context_out_, query_gathered_and_partial_out_;
  runtime::DeviceBuffer group_query_, own_out_;
  runtime::DeviceBuffer partial_lse_, context_lse_, own_lse_;
  // Host staging of the uploads, and pass (a)'s key counts for the split planner; reused.
  std::vector<int32_t> ints_host_, planner_keys_;
  std::vector<int64_t> slots_host_;
};

}  // namespace pagedattn::gpu
