// FLASHINFER's impl: the cache write and the forward over the GPU layer's checks, per-head
// parameters and cascade sequence (backends/gpu/). forward runs the step's parts as build()
// planned them: the prefill part through the paged attention kernel (its rows start after the
// decode rows), then the decode part through the decode kernel, which writes the decode rows. A
// capture build launches both whatever the mix, so the graph replays any mix of the same request
// and token counts. forward is CUDA-graph safe by construction: host checks of shapes, then
// launches.
#include <cuda_runtime.h>

#include <string>

#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/flashinfer/metadata.h"
#include "backends/gpu/cascade_forward.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/head_params.h"
#include "backends/gpu/impl_base.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "kernels/decode/decode_attention.h"
#include "runtime/check.h"

namespace pagedattn::flashinfer {
namespace {

using flash_attn::PassMetadata;

class FlashInferImpl final : public gpu::GpuImpl {
 public:
  using GpuImpl::GpuImpl;

  std::string_view kernel_generation() const override { return "decode+v2"; }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        const FlashInferMetadata* md,
        forward_metadata<FlashInferMetadata>("FLASHINFER", metadata, query, kv_cache, output,
                                             output_lse, scales));
    if (md->step.num_actual_tokens == 0 || md->step.num_reqs == 0) return ok_status();
    runtime::ScopedDevice guard(params_.device.index);  // launches go to the current device
    PAGEDATTN_RETURN_IF_ERROR(guard.status());

    const bool capture = md->for_cudagraph_capture;
    const auto paged = [&](const PassMetadata& pass, const gpu::PassOutput& out) -> Status {
      kernels::PagedAttentionParams p = paged_params(query, kv_cache, scales, *md, pass, capture);
      if (int64_t{p.max_num_splits} * p.num_tokens > md->split.token_capacity) {
        return internal_error("split workspace too small: " + std::to_string(p.max_num_splits) +
                              " splits x " + std::to_string(p.num_tokens) + " tokens");
      }
      set_output(p, out);
      return kernels::launch_paged_attention(p, stream);
    };
    if (md->cascade.enabled) {
      PAGEDATTN_RETURN_IF_ERROR(backends::check_cascade_features(
          "FLASHINFER", md->cascade.common_prefix_len, !params_.alibi_slopes.empty(),
          params_.sliding_window.enabled(), kCascadeFeatures));
      return gpu::run_cascade(
          md->cascade, md->step, query.device(), output, output_lse,
          [&](gpu::CascadePass pass, const gpu::PassOutput& out) {
            return paged(pass == gpu::CascadePass::kPrefix ? md->cascade_prefix : md->prefill, out);
          },
          stream);
    }
    const gpu::PassOutput out = gpu::caller_output(output, output_lse);
    if (capture || md->parts.num_prefills > 0) {
      PAGEDATTN_RETURN_IF_ERROR(paged(md->prefill, out));
    }
    if (md->decode.kernel && (capture || md->parts.num_decodes > 0)) {
      return kernels::launch_decode_attention(decode_params(query, kv_cache, scales, *md, out),
                                              stream);
    }
    return ok_status();
  }

 private:
  kernels::PagedAttentionParams paged_params(const TensorView& query, const TensorView& kv_cache,
                                             const KVScales& scales, const FlashInferMetadata& md,
                                             const PassMetadata& pass, bool capture) const {
    kernels::PagedAttentionParams p;
    fill_layer(p, query, kv_cache, scales);
    p.num_tokens = md.step.num_actual_tokens;
    p.window_right = params_.sliding_window.right;
    p.split_out = md.split.out;
    p.split_lse = md.split.lse;
    p.cu_seqlens_q = pass.cu_seqlens_q;
    p.seqused_k = pass.seqused_k;
    p.block_table = pass.block_table;
    p.block_table_stride = pass.block_table_stride;
    p.num_reqs = pass.num_reqs;
    p.max_query_len = pass.max_query_len;
    p.max_seq_len = pass.max_seq_len;
    p.causal = pass.causal;
    // A captured prefill pass runs unsplit: its grid stays fixed for every replay, and at the
    // graph-safe split bound it launches requests x splits x heads CTAs that a decode-only
    // replay (the decodes run in the decode kernel) retires empty, tens of microseconds a layer.
    // The cascade's prefix pass (one request) keeps its splits.
    const bool unsplit = capture && &pass == &md.prefill;
    p.max_num_splits = unsplit ? 1 : capture ? pass.max_num_splits : pass.max_splits_used;
    p.num_splits_per_req = p.max_num_splits > 1 ? pass.num_splits_per_req : nullptr;
    return p;
  }

  kernels::DecodeAttentionParams decode_params(const TensorView& query, const TensorView& kv_cache,
                                               const KVScales& scales, const FlashInferMetadata& md,
                                               const gpu::PassOutput& out) const {
    kernels::DecodeAttentionParams p;
    fill_layer(p, query, kv_cache, scales);
    p.block_table = md.decode.block_table;
    p.block_table_stride = md.decode.block_table_stride;
    set_output(p, out);
    p.plan = md.decode.plan;
    p.partial_out = md.decode.partial_out;
    p.partial_lse = md.decode.partial_lse;
    p.num_ctas = md.decode.num_ctas;
    return p;
  }
};

}  // namespace

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_impl_params(flashinfer_backend(), params));
  PAGEDATTN_ASSIGN_OR_RETURN(gpu::HeadParams heads, gpu::HeadParams::upload(params));
  return std::unique_ptr<AttentionImpl>(std::make_unique<FlashInferImpl>(params, std::move(heads)));
}

}  // namespace pagedattn::flashinfer
