// FLASHINFER's metadata builder (vLLM's FlashInferMetadataBuilder): reorder threshold 1, the step
// split decodes first, then a plan per part, computed on the host into a pinned mirror of the
// workspace and copied with one asynchronous copy: vLLM's page arrays, the prefill part's query
// starts and split counts, and the decode plan (plan/). Every layer of the step reuses it. The
// launches read their work from the workspace, so their shapes depend on the request and token
// counts only (CUDA graphs ALWAYS). A cascade step (eager only) runs both passes through the paged
// kernel with the GPU layer's cascade sequence. A step sharded by decode context parallelism is
// planned by the GPU layer's DcpBuilder alone (gpu/dcp_step.h).
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/builder_base.h"
#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/flashinfer/metadata.h"
#include "backends/gpu/build_start.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/dcp_builder.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/pass_plan.h"
#include "backends/gpu/step_buffers.h"
#include "backends/gpu/step_workspace.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/decode/decode_attention.h"
#include "plan/page_indptr.h"
#include "plan/prefill_plan.h"
#include "runtime/check.h"

namespace pagedattn::flashinfer {
namespace {

using gpu::PassMetadata;

class FlashInferMetadataBuilder final : public backends::BuilderBase {
 public:
  FlashInferMetadataBuilder(const BuilderParams& params, int num_sms, int decode_ctas,
                            gpu::CascadeBuilder cascade)
      : BuilderBase(params),
        num_sms_(num_sms),
        decode_ctas_(decode_ctas),
        cascade_(std::move(cascade)),
        dcp_("FLASHINFER", params, num_sms) {}

  Status init() {
    PAGEDATTN_ASSIGN_OR_RETURN(
        workspace_, gpu::StepWorkspace::allocate(
                        params_.device.index, gpu::step_workspace_layout(params_, decode_ctas_)));
    split_layout_ =
        plan::split_workspace_layout(params_.max_num_tokens, params_.num_heads, params_.head_size);
    PAGEDATTN_ASSIGN_OR_RETURN(split_,
                               gpu::SplitWorkspace::allocate(params_.device.index, split_layout_));
    return ok_status();
  }

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kAlways; }
  std::optional<int> reorder_batch_threshold() const override { return 1; }

  StatusOr<std::unique_ptr<AttentionMetadata>> build(int common_prefix_len,
                                                     const CommonAttentionMetadata& meta) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        std::unique_ptr<FlashInferMetadata> md,
        gpu::start_build<FlashInferMetadata>(params_, split_, dcp_, common_prefix_len, meta));
    if (md->dcp.enabled) return std::unique_ptr<AttentionMetadata>(std::move(md));
    const int n = meta.num_reqs;
    const auto [qsl, seqs] = gpu::step_lengths(meta);
    runtime::ScopedDevice guard(params_.device.index);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    PAGEDATTN_ASSIGN_OR_RETURN(char* host, workspace_->begin_step());
    const plan::WorkspaceLayout& l = workspace_->layout();
    const char* dev = workspace_->device_ints();
    auto indptr = gpu::StepWorkspace::region<int32_t>(host, l.kv_indptr_offset, n + 1);
    auto last_page = gpu::StepWorkspace::region<int32_t>(host, l.last_page_len_offset, n);
    plan::paged_kv_indptr(seqs, params_.block_size, indptr, last_page);
    md->paged_kv_indptr = indptr.data();
    md->paged_kv_last_page_len = last_page.data();
    for (int r = 0; r < n && md->first_request_with_context < 0; ++r) {
      if (const int context = seqs[r] - (qsl[r + 1] - qsl[r]); context > 0) {
        md->first_request_with_context = r;
        md->first_context_len = context;
      }
    }

    PassMetadata& prefill = md->prefill;
    prefill = gpu::pass_metadata(meta);
    // The prefill pass's own query starts: the decodes' ranges are emptied (the decode kernel's).
    prefill.cu_seqlens_q = reinterpret_cast<const int32_t*>(dev + l.prefill_cu_offset);
    prefill.num_splits_per_req = reinterpret_cast<const int32_t*>(dev + l.prefill_splits_offset);
    const plan::SplitKVConfig split_config =
        gpu::split_config(params_, num_sms_, meta.num_actual_tokens, split_layout_.token_splits);
    prefill.max_num_splits = split_config.max_splits;

    PAGEDATTN_ASSIGN_OR_RETURN(md->cascade, cascade_.plan(common_prefix_len, meta, qsl, seqs));
    std::span<const int32_t> pass_seqs = seqs;
    if (md->cascade.enabled) {
      PAGEDATTN_ASSIGN_OR_RETURN(
          md->cascade_prefix,
          cascade_.split_passes(md->cascade, split_config, num_sms_, md->prefill));
      pass_seqs = cascade_.suffix_seq_lens();
    } else if (meta.causal && decode_ctas_ > 0) {
      md->parts = split_decodes_and_prefills(meta, 1, /*require_uniform=*/true);
    }
    md->parts.num_prefills = n - md->parts.num_decodes;
    md->parts.num_prefill_tokens = qsl[n] - md->parts.num_decode_tokens;

    const int nd = md->parts.num_decodes;
    PAGEDATTN_ASSIGN_OR_RETURN(
        const plan::PrefillPlan prefill_plan,
        plan::plan_prefill(qsl, pass_seqs, nd, split_config, !params_.deterministic,
                           gpu::StepWorkspace::region<int32_t>(host, l.prefill_cu_offset, n + 1),
                           gpu::StepWorkspace::region<int32_t>(host, l.prefill_splits_offset, n)));
    prefill.max_splits_used = prefill_plan.max_splits_used;
    // The decodes (the first nd requests) run in the decode kernel: not this pass's work.
    prefill.kernel =
        gpu::builder_pass_kernel(params_, qsl.subspan(nd), pass_seqs.subspan(nd), meta.causal);

    gpu::DecodePass& decode = md->decode;
    decode.kernel = decode_ctas_ > 0 && !md->cascade.enabled;
    int64_t plan_bytes = 0;
    if (decode.kernel) {
      PAGEDATTN_ASSIGN_OR_RETURN(
          md->decode_stats, plan::plan_decode(qsl.first(nd + 1), seqs.first(nd), decode_config(),
                                              l.decode, scratch_, host + l.decode_plan_offset));
      plan_bytes = md->decode_stats.bytes_used;
      decode.plan = dev + l.decode_plan_offset;
      decode.partial_out = workspace_->partial_out();
      decode.partial_lse = workspace_->partial_lse();
      decode.num_ctas = decode_ctas_;
      decode.block_table = prefill.block_table;
      decode.block_table_stride = prefill.block_table_stride;
    }
    PAGEDATTN_RETURN_IF_ERROR(workspace_->upload(l.decode_plan_offset + plan_bytes));
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }

 private:
  plan::DecodePlanConfig decode_config() const {
    return gpu::decode_plan_config(params_, decode_ctas_);
  }

  int num_sms_ = 0;
  int decode_ctas_ = 0;  // 0: no decode kernel for this layer (decodes run as prefills)
  gpu::CascadeBuilder cascade_;
  gpu::DcpBuilder dcp_;
  std::unique_ptr<gpu::StepWorkspace> workspace_;
  plan::SplitWorkspaceLayout split_layout_;
  gpu::SplitWorkspace split_;
  plan::DecodePlanScratch scratch_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_builder_params(flashinfer_backend(), params));
  if (params.max_num_splits != 0) {
    return invalid_argument(
        "FLASHINFER builder: max_num_splits = " + std::to_string(params.max_num_splits) +
        " is not served (allowed: 0; the decode plan cuts work units with no "
        "per-request split bound)");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(const int num_sms, gpu::builder_sm_count(params));
  PAGEDATTN_ASSIGN_OR_RETURN(
      gpu::CascadeBuilder cascade,
      gpu::CascadeBuilder::create("FLASHINFER", params, kCascadeFeatures, /*prefix_extra_ints=*/1));
  auto builder = std::make_unique<FlashInferMetadataBuilder>(
      params, num_sms, gpu::decode_grid_ctas(params, num_sms), std::move(cascade));
  PAGEDATTN_RETURN_IF_ERROR(builder->init());
  return std::unique_ptr<AttentionMetadataBuilder>(std::move(builder));
}

}  // namespace pagedattn::flashinfer
