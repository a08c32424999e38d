// FLASH_ATTN's metadata builder (vLLM's FlashAttentionMetadataBuilder): the GPU layer's checks,
// persistent buffers and cascade sequence (backends/gpu/), plus what is FLASH_ATTN's own: the
// split-KV schedule, decided on the host by plan::plan_split_kv and copied in build(), and the
// varlen description of each launch. reorder_batch_threshold stays unset: one kernel serves mixed
// prefill/decode batches in any order. Buffer ordering: see backends/gpu/step_buffers.h.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/builder_base.h"
#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/flash_attn/metadata.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/pass_plan.h"
#include "backends/gpu/step_buffers.h"
#include "kernels/attention/paged_attention.h"
#include "plan/split_kv.h"
#include "runtime/check.h"

namespace pagedattn::flash_attn {
namespace {

using gpu::PassMetadata;

using runtime::DeviceBuffer;

class FlashAttnMetadataBuilder final : public backends::BuilderBase {
 public:
  FlashAttnMetadataBuilder(const BuilderParams& params, int num_sms, gpu::CascadeBuilder cascade)
      : BuilderBase(params), num_sms_(num_sms), cascade_(std::move(cascade)) {}

  Status init() {
    const int dev = params_.device.index;
    layout_ =
        plan::split_workspace_layout(params_.max_num_tokens, params_.num_heads, params_.head_size);
    PAGEDATTN_ASSIGN_OR_RETURN(splits_, DeviceBuffer::allocate(dev, 4 * params_.max_num_reqs));
    PAGEDATTN_ASSIGN_OR_RETURN(workspace_, gpu::SplitWorkspace::allocate(dev, layout_));
    return ok_status();
  }

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kAlways; }

  StatusOr<std::unique_ptr<AttentionMetadata>> build(int common_prefix_len,
                                                     const CommonAttentionMetadata& meta) override {
    PAGEDATTN_RETURN_IF_ERROR(gpu::check_step(params_, meta));
    const int num_reqs = meta.num_reqs;
    const int num_tokens = meta.num_actual_tokens;
    const std::span<const int32_t> qsl(meta.query_start_loc_cpu.data_as<const int32_t>(),
                                       static_cast<size_t>(num_reqs) + 1);
    const std::span<const int32_t> seqs(meta.seq_lens_cpu.data_as<const int32_t>(),
                                        static_cast<size_t>(num_reqs));
    runtime::ScopedDevice guard(params_.device.index);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());

    auto md = std::make_unique<FlashAttnMetadata>();
    md->step = gpu::step_info(params_, meta);
    md->split = workspace_.view();

    const plan::SplitKVConfig config =
        gpu::split_config(params_, num_sms_, num_tokens, layout_.token_splits);
    PassMetadata& main = md->main;
    main = gpu::pass_metadata(meta);
    main.num_splits_per_req = splits_.as<const int32_t>();
    main.max_num_splits = config.max_splits;

    PAGEDATTN_ASSIGN_OR_RETURN(md->cascade, cascade_.plan(common_prefix_len, meta, qsl, seqs));
    std::span<const int32_t> main_seqs = seqs;
    if (md->cascade.enabled) {
      PAGEDATTN_ASSIGN_OR_RETURN(md->prefix,
                                 cascade_.split_passes(md->cascade, config, num_sms_, main));
      main_seqs = cascade_.suffix_seq_lens();
    }
    main.kernel = gpu::builder_pass_kernel(params_, qsl, main_seqs, meta.causal);
    PAGEDATTN_ASSIGN_OR_RETURN(const plan::SplitSchedule schedule,
                               plan::plan_split_kv(qsl, main_seqs, config));
    main.max_splits_used = schedule.max_splits_used;
    splits_host_ = schedule.num_splits_per_req;
    PAGEDATTN_RETURN_IF_ERROR(
        gpu::copy_ints_to_device(splits_host_, splits_, "the split schedule"));
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }

 private:
  int num_sms_ = 0;
  gpu::CascadeBuilder cascade_;
  plan::SplitWorkspaceLayout layout_;
  DeviceBuffer splits_;  // [max_num_reqs] int32
  gpu::SplitWorkspace workspace_;
  std::vector<int32_t> splits_host_;  // staging of the copy
};

}  // namespace

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_builder_params(flash_attn_backend(), params));
  PAGEDATTN_ASSIGN_OR_RETURN(const int num_sms, gpu::builder_sm_count(params));
  PAGEDATTN_ASSIGN_OR_RETURN(
      gpu::CascadeBuilder cascade,
      gpu::CascadeBuilder::create("FLASH_ATTN", params, kCascadeFeatures, /*prefix_extra_ints=*/1));
  auto builder = std::make_unique<FlashAttnMetadataBuilder>(params, num_sms, std::move(cascade));
  PAGEDATTN_RETURN_IF_ERROR(builder->init());
  return std::unique_ptr<AttentionMetadataBuilder>(std::move(builder));
}

}  // namespace pagedattn::flash_attn
