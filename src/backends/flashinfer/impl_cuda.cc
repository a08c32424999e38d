// FLASHINFER's impl: the cache write and the forward over the GPU layer's checks, per-head
// parameters and cascade sequence (backends/gpu/). forward runs the step's parts as build()
// planned them: the prefill part through the paged attention kernel (its rows start after the
// decode rows), then the decode part through the decode kernel, which writes the decode rows. A
// capture build launches both whatever the mix, so the graph replays any mix of the same request
// and token counts. forward is CUDA-graph safe by construction: host checks of shapes, then
// launches (a sharded step excepted: it runs eagerly, gpu/dcp_checks.h).
//
// With a cache every prefill, first prefills included, reads the cache, as vLLM's FlashInfer
// backend does: key/value are not passed to the kernel, so only the paged kernels start (given
// key/value the launcher adds the ragged kernels, and each kernel's CTAs for the other's requests
// return at once, which costs real time in a CUDA graph; docs/kernels/v2_prefill.md, ragged
// source). The ragged source (FlashInfer's prefill over contiguous K/V) serves encoder and
// encoder-only layers run with no cache: no cache write, every request read from key/value. A step
// sharded by decode context parallelism runs the GPU layer's sequence (gpu/dcp_forward.h) through
// the paged kernels, as FLASH_ATTN's does.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/factories.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/flashinfer/metadata.h"
#include "backends/gpu/cascade_forward.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/fp8_query.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/head_params.h"
#include "backends/gpu/impl_base.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "kernels/decode/decode_attention.h"
#include "runtime/check.h"

namespace pagedattn::flashinfer {
namespace {

using gpu::PassMetadata;

class FlashInferImpl final : public gpu::GpuImpl {
 public:
  FlashInferImpl(const AttentionImplParams& params, kernels::KernelGeneration generation,
                 gpu::HeadParams heads)
      : GpuImpl(params, std::move(heads)),
        generations_(generation, params.kernel_generation != 0) {}

  // Decodes run the decode kernel; prefills the paged kernel of the generation its launches used.
  std::string_view kernel_generation() const override {
    const std::string_view paged = generations_.used();
    return paged == "v2" ? "decode+v2" : paged == "v3" ? "decode+v3" : "decode+v3/v2";
  }

  Status do_kv_cache_update(const TensorView& key, const TensorView& value,
                            const KVCacheView& kv_cache, const TensorView& slot_mapping,
                            const KVScales& scales, StreamHandle stream) override {
    if (!kv_cache.defined() && runs_without_cache()) return ok_status();  // nothing to write
    return GpuImpl::do_kv_cache_update(key, value, kv_cache, slot_mapping, scales, stream);
  }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const KVCacheView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    const bool no_cache = !kv_cache.defined();
    if (no_cache && !runs_without_cache()) {
      return invalid_argument(
          "FLASHINFER forward: kv_cache is undefined; only encoder and "
          "encoder-only attention run without a cache (attn_type is " +
          std::string(attention_type_name(params_.attn_type)) + ")");
    }
    PAGEDATTN_ASSIGN_OR_RETURN(
        const FlashInferMetadata* md,
        forward_metadata<FlashInferMetadata>("FLASHINFER", metadata, query, kv_cache, output,
                                             output_lse, scales, /*cache_optional=*/no_cache));
    if (md->step.num_actual_tokens == 0 || md->step.num_reqs == 0) return ok_status();
    if (no_cache) {
      PAGEDATTN_RETURN_IF_ERROR(check_cacheless_step(*md));
      PAGEDATTN_RETURN_IF_ERROR(gpu::check_new_tokens(params_, md->step, key, value));
    }
    runtime::ScopedDevice guard(params_.device.index);  // launches go to the current device
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    const bool capture = md->for_cudagraph_capture;
    gpu::ForwardQuery q(query, scales.q_scale, params_.dtype, md->step.query_start_loc,
                        md->step.num_reqs, stream);
    // The decode kernel, cascade and DCP read 16-bit queries: an e4m3 one is dequantized first.
    const bool decode_kernel =
        md->decode.kernel && !no_cache && (capture || md->parts.num_decodes > 0);
    if (q.e4m3() && (runs_dcp(md->dcp) || md->cascade.enabled || decode_kernel)) {
      PAGEDATTN_ASSIGN_OR_RETURN(const TensorView dequantized, q.dequantized());
      return forward(dequantized, key, value, kv_cache, metadata, output, output_lse,
                     {scales.k_scale, scales.v_scale}, stream);
    }
    if (runs_dcp(md->dcp)) {
      return forward_dcp("FLASHINFER", md->dcp, md->step, md->for_cudagraph_capture, query, key,
                         value, kv_cache, scales, output, output_lse, generations_, stream);
    }

    // first_request: the step's request that is the pass's first (its q_scale row).
    const auto paged = [&](const PassMetadata& pass, const gpu::PassOutput& out,
                           int first_request = 0) -> Status {
      kernels::PagedAttentionParams p =
          paged_layer_params(query, kv_cache, scales, md->step.num_actual_tokens, md->split);
      if (no_cache) {  // the ragged source alone: every request's keys are its new tokens
        p.cache_dtype = params_.dtype;
        p.block_size = md->step.block_size;
        p.k_new = key.data();
        p.v_new = value.data();
        p.new_token_stride = key.stride(0);
        p.new_head_stride = key.stride(1);
      }
      // A captured prefill pass runs unsplit: its grid stays fixed for every replay, and at the
      // graph-safe split bound it launches requests x splits x heads CTAs that a decode-only
      // replay (the decodes run in the decode kernel) retires empty, tens of microseconds a
      // layer. The cascade's prefix pass (one request) keeps its splits.
      const int max_splits = !capture                ? pass.max_splits_used
                             : &pass == &md->prefill ? 1
                                                     : pass.max_num_splits;
      PAGEDATTN_RETURN_IF_ERROR(set_pass(p, pass, max_splits, md->split.token_capacity));
      set_output(p, out);
      offer_fp8_tensor_cores(p, md->split);
      PAGEDATTN_RETURN_IF_ERROR(q.bind(p, first_request));  // before the choice and after
      generations_.choose(p, pass.kernel);
      PAGEDATTN_RETURN_IF_ERROR(q.bind(p, first_request));
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
    if (capture) {
      PAGEDATTN_RETURN_IF_ERROR(paged(md->prefill, out));
    } else if (md->parts.num_prefills > 0) {
      // Eager: the prefill launch starts after the decodes (on the mixed batch of 64 decodes and
      // one chunk, their empty CTAs were most of its grid).
      PAGEDATTN_RETURN_IF_ERROR(paged(gpu::pass_from_request(md->prefill, md->parts.num_decodes),
                                      out, md->parts.num_decodes));
    }
    if (decode_kernel) {
      return kernels::launch_decode_attention(decode_params(query, kv_cache, scales, md->decode, out),
                                              stream);
    }
    return ok_status();
  }

 private:
  // vLLM runs encoder and encoder-only attention on the new tokens alone, with no cache.
  bool runs_without_cache() const {
    return params_.attn_type == AttentionType::kEncoder ||
           params_.attn_type == AttentionType::kEncoderOnly;
  }

  // Without a cache every key must be a new token of its own request, and no request may be a
  // decode (the decode kernel reads the cache).
  static Status check_cacheless_step(const FlashInferMetadata& md) {
    if (md.first_request_with_context >= 0) {
      return invalid_argument(
          "FLASHINFER forward without a kv_cache: request " +
          std::to_string(md.first_request_with_context) + " has " +
          std::to_string(md.first_context_len) +
          " tokens of context; without a cache every request's seq_len must equal its query "
          "length");
    }
    if (md.decode.kernel && md.parts.num_decodes > 0) {
      return invalid_argument(
          "FLASHINFER forward without a kv_cache: " + std::to_string(md.parts.num_decodes) +
          " requests run as decodes, which read the cache (build the step "
          "non-causal, as encoder attention is)");
    }
    return ok_status();
  }

  gpu::LaunchGenerations generations_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_impl_params(flashinfer_backend(), params));
  PAGEDATTN_RETURN_IF_ERROR(gpu::check_dcp_impl_params("FLASHINFER", params));
  PAGEDATTN_ASSIGN_OR_RETURN(const kernels::KernelGeneration generation,
                             gpu::LaunchGenerations::for_layer("FLASHINFER", params));
  PAGEDATTN_ASSIGN_OR_RETURN(gpu::HeadParams heads, gpu::HeadParams::upload(params));
  return std::unique_ptr<AttentionImpl>(
      std::make_unique<FlashInferImpl>(params, generation, std::move(heads)));
}

}  // namespace pagedattn::flashinfer
