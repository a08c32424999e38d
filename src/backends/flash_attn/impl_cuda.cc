// FLASH_ATTN's impl (vLLM's FlashAttentionImpl): the cache write and the forward, over the GPU
// layer's checks, per-head parameters and cascade sequence (backends/gpu/). What is FLASH_ATTN's
// own: the step's launches as build() planned them (the paged kernels' pass, then the decode
// kernel for the decode rows) and the split bound of each (the kernel generation of each launch:
// gpu/generation.h). A step sharded by decode context parallelism runs the GPU layer's sequence
// (gpu/dcp_forward.h) through the same paged kernels.
// forward is CUDA-graph safe by construction: host checks of shapes (no synchronisation, no
// allocation), then launches; every data-dependent choice was made in build(). A sharded step
// runs eagerly (its capture is refused: gpu/dcp_checks.h).
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include <cuda_runtime.h>

#include <string>

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/flash_attn/metadata.h"
#include "backends/gpu/cascade_forward.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/fp8_query.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/head_params.h"
#include "backends/gpu/impl_base.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "runtime/check.h"

namespace pagedattn::flash_attn {
namespace {

using gpu::PassMetadata;

class FlashAttnImpl final : public gpu::GpuImpl {
 public:
  FlashAttnImpl(const AttentionImplParams& params, kernels::KernelGeneration generation,
                gpu::HeadParams heads)
      : GpuImpl(params, std::move(heads)),
        generations_(generation, params.kernel_generation != 0) {}

  std::string_view kernel_generation() const override { return generations_.used(); }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const KVCacheView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        const FlashAttnMetadata* md,
        forward_metadata<FlashAttnMetadata>("FLASH_ATTN", metadata, query, kv_cache, output,
                                            output_lse, scales));
    if (md->step.num_actual_tokens == 0 || md->step.num_reqs == 0) return ok_status();
    runtime::ScopedDevice guard(params_.device.index);  // launches go to the current device
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    const bool capture = md->for_cudagraph_capture;
    gpu::ForwardQuery q(query, scales.q_scale, params_.dtype, md->step.query_start_loc,
                        md->step.num_reqs, stream);
    // The decode kernel, cascade and DCP read 16-bit queries: an e4m3 one is dequantized first.
    if (q.e4m3() && (runs_dcp(md->dcp) || md->cascade.enabled ||
                     (md->decode.kernel && (capture || md->num_decodes > 0)))) {
      PAGEDATTN_ASSIGN_OR_RETURN(const TensorView dequantized, q.dequantized());
      return forward(dequantized, key, value, kv_cache, metadata, output, output_lse,
                     {scales.k_scale, scales.v_scale}, stream);
    }
    if (runs_dcp(md->dcp)) {
      return forward_dcp("FLASH_ATTN", md->dcp, md->step, md->for_cudagraph_capture, query, key,
                         value, kv_cache, scales, output, output_lse, generations_, stream);
    }

    const kernels::PagedAttentionParams base =
        paged_layer_params(query, kv_cache, scales, md->step.num_actual_tokens, md->split);
    // Metadata built for capture launches with the graph-safe split bound (a captured grid stays
    // fixed for every replay); eager metadata with this step's own largest count.
    const auto launch = [&](const PassMetadata& pass, const gpu::PassOutput& out,
                            int max_splits) -> Status {
      kernels::PagedAttentionParams p = base;
      PAGEDATTN_RETURN_IF_ERROR(set_pass(p, pass, max_splits, md->split.token_capacity));
      set_output(p, out);
      offer_fp8_tensor_cores(p, md->split);
      PAGEDATTN_RETURN_IF_ERROR(q.bind(p));  // before the choice and after (gpu/fp8_query.h)
      generations_.choose(p, pass.kernel);
      PAGEDATTN_RETURN_IF_ERROR(q.bind(p));
      return kernels::launch_paged_attention(p, stream);
    };
    const auto split_bound = [&](const PassMetadata& pass) {
      return capture ? pass.max_num_splits : pass.max_splits_used;
    };
    const gpu::PassOutput out = gpu::caller_output(output, output_lse);
    if (md->cascade.enabled) {
      PAGEDATTN_RETURN_IF_ERROR(backends::check_cascade_features(
          "FLASH_ATTN", md->cascade.common_prefix_len, !params_.alibi_slopes.empty(),
          params_.sliding_window.enabled(), kCascadeFeatures));
      return gpu::run_cascade(
          md->cascade, md->step, query.device(), output, output_lse,
          [&](gpu::CascadePass which, const gpu::PassOutput& pass_out) {
            const PassMetadata& pass = which == gpu::CascadePass::kPrefix ? md->prefix : md->main;
            return launch(pass, pass_out, split_bound(pass));
          },
          stream);
    }
    if (!md->decode.kernel) return launch(md->main, out, split_bound(md->main));
    // The decode kernel is causal: a bidirectional layer's multi-token rows (and, captured, any
    // replay's) run every request through the paged kernels, unsplit (the split schedule left
    // the decodes out).
    if (!params_.causal_in_step(true) && (capture || md->decode_max_query_len > 1)) {
      PassMetadata every_request = md->main;
      every_request.pass_requests = nullptr;
      return launch(every_request, out, 1);
    }
    // A captured prefill pass covers every slot (a replay may bring any mix) and runs unsplit:
    // at the graph-safe bound a decode-only replay would retire slots x splits x heads empty CTAs.
    if (capture) {
      PassMetadata every_slot = md->main;
      every_slot.num_pass_reqs = every_slot.num_reqs;
      PAGEDATTN_RETURN_IF_ERROR(launch(every_slot, out, 1));
    } else if (md->main.num_pass_reqs > 0) {
      PassMetadata prefills = md->main;
      // Without decodes the pass serves every request: no slot list for each tile to read first.
      if (md->num_decodes == 0) prefills.pass_requests = nullptr;
      PAGEDATTN_RETURN_IF_ERROR(launch(prefills, out, prefills.max_splits_used));
    }
    if (!capture && md->num_decodes == 0) return ok_status();
    generations_.note_decode();
    return kernels::launch_decode_attention(decode_params(query, kv_cache, scales, md->decode, out),
                                            stream);
  }

 private:
  gpu::LaunchGenerations generations_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_impl_params(flash_attn_backend(), params));
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_dcp_impl_params("FLASH_ATTN", params));
  PAGEDATTN_ASSIGN_OR_RETURN(const kernels::KernelGeneration generation,
                             gpu::LaunchGenerations::for_layer("FLASH_ATTN", params));
  PAGEDATTN_ASSIGN_OR_RETURN(gpu::HeadParams heads, gpu::HeadParams::upload(params));
  return std::unique_ptr<AttentionImpl>(
      std::make_unique<FlashAttnImpl>(params, generation, std::move(heads)));
}

}  // namespace pagedattn::flash_attn
