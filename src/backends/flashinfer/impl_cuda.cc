// FLASHINFER's impl: the cache write and the forward over the GPU layer's checks, per-head
// parameters and cascade sequence (backends/gpu/). forward runs the step's parts as build()
// planned them: the prefill part through the paged attention kernel (its rows start after the
// decode rows), then the decode part through the decode kernel, which writes the decode rows. A capture build launches both whatever the mix, so the graph replays any mix
// of the same request and token counts. forward is CUDA-graph safe by construction: host checks
// of shapes, then launches.
#include <cuda_runtime.h>

#include <string>

#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/flashinfer/metadata.h"
#include "backends/gpu/cascade_forward.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/head_params.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "kernels/decode/decode_attention.h"
#include "runtime/check.h"

namespace pagedattn::flashinfer {
namespace {

using flash_attn::PassMetadata;

class FlashInferImpl final : public AttentionImpl {
 public:
  FlashInferImpl(const AttentionImplParams& params, gpu::HeadParams heads)
      : AttentionImpl(params),
        cache_dtype_(kv_cache_storage_dtype(params.kv_cache_dtype, params.dtype)),
        heads_(std::move(heads)) {}

  std::string_view kernel_generation() const override { return "decode+v2"; }

  Status do_kv_cache_update(const TensorView& key, const TensorView& value,
                            const TensorView& kv_cache, const TensorView& slot_mapping,
                            const KVScales& scales, StreamHandle stream) override {
    PAGEDATTN_RETURN_IF_ERROR(gpu::check_cache_update(params_, cache_dtype_, key, value, kv_cache));
    return kernels::launch_cache_write(key, value, kv_cache, slot_mapping, scales.k_scale,
                                       scales.v_scale, stream);
  }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    const auto* md = dynamic_cast<const FlashInferMetadata*>(&metadata);
    if (md == nullptr) {
      return invalid_argument("FLASHINFER forward needs metadata from a FLASHINFER builder");
    }
    PAGEDATTN_RETURN_IF_ERROR(gpu::check_forward(params_, cache_dtype_, md->step, query, kv_cache,
                                                 output, output_lse, scales));
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
            return paged(pass == gpu::CascadePass::kPrefix ? md->cascade_prefix : md->prefill,
                         out);
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
  // The fields the paged attention and decode kernels' parameter blocks share (same names).
  template <typename P>
  void fill_layer(P& p, const TensorView& query, const TensorView& kv_cache,
                  const KVScales& scales) const {
    p.q = query.data();
    p.q_token_stride = query.stride(0);
    p.q_head_stride = query.stride(1);
    p.q_dtype = params_.dtype;
    p.kv_cache = kv_cache.data();
    p.cache_dtype = cache_dtype_;
    p.cache_block_stride = kv_cache.stride(0);
    p.cache_kv_stride = kv_cache.stride(1);
    p.cache_token_stride = kv_cache.stride(2);
    p.cache_head_stride = kv_cache.stride(3);
    p.k_scale = heads_.scale_or_unit(scales.k_scale);
    p.v_scale = heads_.scale_or_unit(scales.v_scale);
    p.per_head_scales = scales.k_scale.defined() && scales.k_scale.numel() > 1;
    p.num_heads = params_.num_heads;
    p.num_kv_heads = params_.num_kv_heads;
    p.head_size = params_.head_size;
    p.block_size = static_cast<int>(kv_cache.size(2));
    p.scale = params_.resolved_scale();
    p.softcap = params_.logits_soft_cap > 0.0f ? params_.logits_soft_cap : 0.0f;
    p.alibi_slopes = heads_.alibi_slopes();
    p.window_left = params_.sliding_window.left;
  }

  template <typename P>
  void set_output(P& p, const gpu::PassOutput& out) const {
    p.out = out.out;
    p.out_token_stride = out.token_stride;
    p.out_head_stride = out.head_stride;
    p.lse = out.lse;
    p.lse_head_stride = out.lse_head_stride;
    p.sinks = out.with_sinks ? heads_.sinks() : nullptr;
  }

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
    // Captured launches keep the graph-safe split bound (their grid stays fixed for every replay).
    p.max_num_splits = capture ? pass.max_num_splits : pass.max_splits_used;
    p.num_splits_per_req = p.max_num_splits > 1 ? pass.num_splits_per_req : nullptr;
    return p;
  }

  kernels::DecodeAttentionParams decode_params(const TensorView& query, const TensorView& kv_cache,
                                               const KVScales& scales,
                                               const FlashInferMetadata& md,
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

  DType cache_dtype_;
  gpu::HeadParams heads_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_impl_params(flashinfer_backend(), params));
  PAGEDATTN_ASSIGN_OR_RETURN(gpu::HeadParams heads, gpu::HeadParams::upload(params));
  return std::unique_ptr<AttentionImpl>(
      std::make_unique<FlashInferImpl>(params, std::move(heads)));
}

}  // namespace pagedattn::flashinfer
