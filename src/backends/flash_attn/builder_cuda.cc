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

    plan::SplitKVConfig config;
    config.num_sms = num_sms_;
    config.num_heads = params_.num_heads;
    config.num_kv_heads = params_.num_kv_heads;
    config.head_size = kernels::paged_attention_kernel_head_size(params_.head_size);
    config.block_size = params_.block_size;
    config.window_left = params_.sliding_window.left;
    // Deterministic: no split-KV, so a request's reduction order never depends on the batch.
    config.max_splits =
        params_.deterministic
            ? 1
            : plan::graph_safe_max_splits(num_tokens, layout_.token_splits, params_.num_heads,
                                          params_.num_kv_heads, config.head_size, num_sms_);

    PassMetadata& main = md->main;
    main.cu_seqlens_q = meta.query_start_loc.data_as<const int32_t>();
    main.seqused_k = meta.seq_lens.data_as<const int32_t>();
    main.block_table = meta.block_table_tensor.data_as<const int32_t>();
    main.block_table_stride = meta.block_table_tensor.stride(0);
    main.num_reqs = num_reqs;
    main.max_query_len = meta.max_query_len;
    main.max_seq_len = meta.max_seq_len;
    main.causal = meta.causal;
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
