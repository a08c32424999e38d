// FLASH_ATTN's metadata builder (vLLM's FlashAttentionMetadataBuilder): the GPU layer's checks,
// persistent buffers and cascade sequence (backends/gpu/), plus what is FLASH_ATTN's own. One call
// serves a mixed batch in any order (reorder_batch_threshold stays unset): requests of at most
// plan::kMaxDecodeQueryLen query tokens run the GQA-packed decode kernel, the way
// FlashAttention-3 sends decode-shaped problems to its packed split path, and the others one
// prefill pass of the paged kernels that names its requests. A cascade step, a non-causal step, a
// split bound (BuilderParams::max_num_splits) or a layer with no decode kernel runs every request
// through the paged kernels. The plans are made on the host into the step workspace
// (gpu/step_workspace.h) and copied with one asynchronous copy. A step sharded by decode context
// parallelism is planned by the GPU layer's DcpBuilder alone (gpu/dcp_step.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "backends/builder_base.h"
#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/flash_attn/metadata.h"
#include "backends/gpu/build_start.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/dcp_builder.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/pass_plan.h"
#include "backends/gpu/step_buffers.h"
#include "backends/gpu/step_workspace.h"
#include "kernels/attention/paged_attention.h"
#include "plan/decode_plan.h"
#include "plan/prefill_plan.h"
#include "plan/split_kv.h"
#include "runtime/check.h"

namespace pagedattn::flash_attn {
namespace {

using gpu::PassMetadata;
using gpu::StepWorkspace;

class FlashAttnMetadataBuilder final : public backends::BuilderBase {
 public:
  FlashAttnMetadataBuilder(const BuilderParams& params, int num_sms, int decode_ctas,
                           gpu::CascadeBuilder cascade)
      : BuilderBase(params),
        num_sms_(num_sms),
        decode_ctas_(decode_ctas),
        cascade_(std::move(cascade)),
        dcp_("FLASH_ATTN", params, num_sms) {}

  Status init() {
    const int dev = params_.device.index;
    layout_ =
        plan::split_workspace_layout(params_.max_num_tokens, params_.num_heads, params_.head_size);
    PAGEDATTN_ASSIGN_OR_RETURN(split_, gpu::SplitWorkspace::allocate(dev, layout_));
    PAGEDATTN_ASSIGN_OR_RETURN(
        workspace_,
        StepWorkspace::allocate(dev, gpu::step_workspace_layout(params_, decode_ctas_)));
    return ok_status();
  }

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kAlways; }

  StatusOr<std::unique_ptr<AttentionMetadata>> build(int common_prefix_len,
                                                     const CommonAttentionMetadata& meta) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        std::unique_ptr<FlashAttnMetadata> md,
        gpu::start_build<FlashAttnMetadata>(params_, split_, dcp_, common_prefix_len, meta));
    if (md->dcp.enabled) return std::unique_ptr<AttentionMetadata>(std::move(md));
    const int n = meta.num_reqs;
    const auto [qsl, seqs] = gpu::step_lengths(meta);
    runtime::ScopedDevice guard(params_.device.index);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_ASSIGN_OR_RETURN(char* host, workspace_->begin_step());
    const plan::WorkspaceLayout& l = workspace_->layout();
    const char* dev = workspace_->device_ints();

    const plan::SplitKVConfig config =
        gpu::split_config(params_, num_sms_, meta.num_actual_tokens, layout_.token_splits);
    PassMetadata& main = md->main;
    main = gpu::pass_metadata(meta);
    main.num_splits_per_req = reinterpret_cast<const int32_t*>(dev + l.prefill_splits_offset);
    main.max_num_splits = config.max_splits;
    const std::span<int32_t> splits =
        StepWorkspace::region<int32_t>(host, l.prefill_splits_offset, n);

    PAGEDATTN_ASSIGN_OR_RETURN(md->cascade, cascade_.plan(common_prefix_len, meta, qsl, seqs));
    std::span<const int32_t> main_seqs = seqs;
    if (md->cascade.enabled) {
      PAGEDATTN_ASSIGN_OR_RETURN(md->prefix,
                                 cascade_.split_passes(md->cascade, config, num_sms_, main));
      main_seqs = cascade_.suffix_seq_lens();
    }
    md->decode.kernel =
        decode_ctas_ > 0 && !md->cascade.enabled && meta.causal && params_.max_num_splits == 0;
    if (!md->decode.kernel) {
      main.kernel = gpu::builder_pass_kernel(params_, qsl, main_seqs, meta.causal);
      PAGEDATTN_ASSIGN_OR_RETURN(const plan::SplitSchedule schedule,
                                 plan::plan_split_kv(qsl, main_seqs, config));
      main.max_splits_used = schedule.max_splits_used;
      std::copy(schedule.num_splits_per_req.begin(), schedule.num_splits_per_req.end(),
                splits.begin());
      PAGEDATTN_RETURN_IF_ERROR(workspace_->upload(l.prefill_splits_offset + 4 * int64_t{n}));
      return std::unique_ptr<AttentionMetadata>(std::move(md));
    }

    // The decode kernel's requests and the prefill pass's, in batch order; the pass's list is
    // padded with empty slots to num_reqs for a captured launch.
    plan::route_requests(qsl, seqs, plan::kMaxDecodeQueryLen, routing_);
    PAGEDATTN_ASSIGN_OR_RETURN(const plan::PrefillPlan prefill,
                               plan::plan_listed_prefill(qsl, seqs, routing_.prefills, config,
                                                         /*allow_splits=*/true, listed_, splits));
    main.max_splits_used = prefill.max_splits_used;
    main.kernel =
        gpu::builder_pass_kernel(params_, listed_.query_start_loc, listed_.seq_lens, meta.causal);
    const std::span<int32_t> pass_requests =
        StepWorkspace::region<int32_t>(host, l.pass_requests_offset, n);
    std::fill(std::copy(routing_.prefills.begin(), routing_.prefills.end(), pass_requests.begin()),
              pass_requests.end(), -1);
    main.pass_requests = reinterpret_cast<const int32_t*>(dev + l.pass_requests_offset);
    main.num_pass_reqs = prefill.num_prefills;

    PAGEDATTN_ASSIGN_OR_RETURN(const plan::DecodePlanStats stats,
                               plan::plan_decode(qsl, seqs, routing_.decodes,
                                                 gpu::decode_plan_config(params_, decode_ctas_),
                                                 l.decode, scratch_, host + l.decode_plan_offset));
    md->num_decodes = static_cast<int>(routing_.decodes.size());
    md->decode_max_query_len = routing_.decode_max_query_len;
    gpu::DecodePass& decode = md->decode;
    decode.plan = dev + l.decode_plan_offset;
    decode.partial_out = workspace_->partial_out();
    decode.partial_lse = workspace_->partial_lse();
    decode.num_ctas = decode_ctas_;
    decode.block_table = main.block_table;
    decode.block_table_stride = main.block_table_stride;
    PAGEDATTN_RETURN_IF_ERROR(workspace_->upload(l.decode_plan_offset + stats.bytes_used));
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }

 private:
  int num_sms_ = 0;
  int decode_ctas_ = 0;  // 0: no decode kernel for this layer
  gpu::CascadeBuilder cascade_;
  gpu::DcpBuilder dcp_;
  plan::SplitWorkspaceLayout layout_;
  gpu::SplitWorkspace split_;
  std::unique_ptr<StepWorkspace> workspace_;
  plan::StepRouting routing_;
  plan::ListedPrefillScratch listed_;
  plan::DecodePlanScratch scratch_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_builder_params(flash_attn_backend(), params));
  PAGEDATTN_ASSIGN_OR_RETURN(const int num_sms, gpu::builder_sm_count(params));
  PAGEDATTN_ASSIGN_OR_RETURN(
      gpu::CascadeBuilder cascade,
      gpu::CascadeBuilder::create("FLASH_ATTN", params, kCascadeFeatures, /*prefix_extra_ints=*/1));
  auto builder = std::make_unique<FlashAttnMetadataBuilder>(
      params, num_sms, gpu::decode_grid_ctas(params, num_sms), std::move(cascade));
  PAGEDATTN_RETURN_IF_ERROR(builder->init());
  return std::unique_ptr<AttentionMetadataBuilder>(std::move(builder));
}

}  // namespace pagedattn::flash_attn
