// What every GPU backend's impl shares: the cache update, the forward preamble (the backend's own
// metadata type, the forward checks), the per-layer fields of a kernel's parameter block, which
// the paged attention and decode kernels name alike, and the forward under decode context
// parallelism. Include from *_cuda.cc files only.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "backends/gpu/cascade_forward.h"
#include "backends/gpu/checks.h"
#include "backends/gpu/dcp_checks.h"
#include "backends/gpu/dcp_forward.h"
#include "backends/gpu/generation.h"
#include "backends/gpu/head_params.h"
#include "backends/gpu/metadata.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "kernels/decode/decode_attention.h"
#include "pagedattn/backend.h"
#include "pagedattn/communicator.h"

namespace pagedattn::gpu {

class GpuImpl : public AttentionImpl {
 public:
  GpuImpl(const AttentionImplParams& params, HeadParams heads)
      : AttentionImpl(params),
        cache_dtype_(kv_cache_storage_dtype(params.kv_cache_dtype, params.dtype)),
        heads_(std::move(heads)) {}

  Status do_kv_cache_update(const TensorView& key, const TensorView& value,
                            const KVCacheView& kv_cache, const TensorView& slot_mapping,
                            const KVScales& scales, StreamHandle stream) override {
    PAGEDATTN_RETURN_IF_ERROR(check_cache_update(params_, cache_dtype_, key, value, kv_cache));
    return kernels::launch_cache_write(key, value, kv_cache, slot_mapping, scales.k_scale,
                                       scales.v_scale, stream);
  }

 protected:
  // The step's metadata as the backend's own type M (which holds a StepInfo `step`), after the
  // forward checks of this layer's tensors against it (cache_optional: kv_cache may be undefined).
  template <typename M>
  StatusOr<const M*> forward_metadata(std::string_view backend, const AttentionMetadata& metadata,
                                      const TensorView& query, const KVCacheView& kv_cache,
                                      const TensorView& output, const TensorView& output_lse,
                                      const KVScales& scales, bool cache_optional = false) const {
    const auto* md = dynamic_cast<const M*>(&metadata);
    if (md == nullptr) {
      return invalid_argument(std::string(backend) + " forward needs metadata from a " +
                              std::string(backend) + " builder");
    }
    PAGEDATTN_RETURN_IF_ERROR(check_forward(params_, cache_dtype_, md->step, query, kv_cache,
                                            output, output_lse, scales, cache_optional));
    return md;
  }

  void fill_layer(kernels::PagedOperands& p, const TensorView& query, const KVCacheView& kv_cache,
                  const KVScales& scales) const {
    p.q = query.data();
    p.q_token_stride = query.stride(0);
    p.q_head_stride = query.stride(1);
    p.q_dtype = params_.dtype;
    p.k_cache = kv_cache.key().data();
    p.v_cache = kv_cache.value().data();
    p.cache_dtype = cache_dtype_;
    p.cache_block_stride = kv_cache.key().stride(0);
    p.cache_token_stride = kv_cache.key().stride(1);
    p.cache_head_stride = kv_cache.key().stride(2);
    p.k_scale = heads_.scale_or_unit(scales.k_scale);
    p.v_scale = heads_.scale_or_unit(scales.v_scale);
    p.per_head_scales = scales.k_scale.defined() && scales.k_scale.numel() > 1;
    p.num_heads = params_.num_heads;
    p.num_kv_heads = params_.num_kv_heads;
    p.head_size = params_.head_size;
    p.block_size = static_cast<int>(kv_cache.block_size());
    p.scale = params_.resolved_scale();
    p.softcap = params_.logits_soft_cap > 0.0f ? params_.logits_soft_cap : 0.0f;
    p.alibi_slopes = heads_.alibi_slopes();
    p.window_left = params_.sliding_window.left;
  }

  // A paged attention launch's fields that no pass changes: the layer, the step's token count, the
  // split workspace.
  kernels::PagedAttentionParams paged_layer_params(const TensorView& query,
                                                   const KVCacheView& kv_cache,
                                                   const KVScales& scales, int num_tokens,
                                                   const SplitWorkspaceView& split) const {
    kernels::PagedAttentionParams p;
    fill_layer(p, query, kv_cache, scales);
    p.num_tokens = num_tokens;
    p.window_right = params_.sliding_window.right;
    p.split_out = split.out;
    p.split_lse = split.lse;
    return p;
  }

  // One pass's part of a paged attention launch, run with `max_num_splits` splits at most (a
  // captured launch: a graph-safe bound; an eager one: the step's own largest count), checked
  // against the split workspace (p.num_tokens set). The mask is the pass's as this layer's type
  // sees it (encoder layers are bidirectional in a causal step).
  Status set_pass(kernels::PagedAttentionParams& p, const PassMetadata& pass, int max_num_splits,
                  int64_t token_capacity) const {
    p.cu_seqlens_q = pass.cu_seqlens_q;
    p.seqused_k = pass.seqused_k;
    p.block_table = pass.block_table;
    p.block_table_stride = pass.block_table_stride;
    p.num_reqs = pass.num_reqs;
    p.pass_requests = pass.pass_requests;
    p.num_pass_reqs = pass.num_pass_reqs;
    p.max_query_len = pass.max_query_len;
    p.max_seq_len = pass.max_seq_len;
    p.causal = params_.causal_in_step(pass.causal);
    p.max_num_splits = max_num_splits;
    p.num_splits_per_req = max_num_splits > 1 ? pass.num_splits_per_req : nullptr;
    if (int64_t{max_num_splits} * p.num_tokens > token_capacity) {
      return internal_error("split workspace too small: " + std::to_string(max_num_splits) +
                            " splits x " + std::to_string(p.num_tokens) + " tokens > " +
                            std::to_string(token_capacity));
    }
    return ok_status();
  }

  // The FP8 tensor cores for this launch (set_pass done) where the layer permits them
  // (AttentionImplParams::fp8_tensor_cores): an unsplit launch over every request, V's transposed
  // images in the split workspace's partials (unused by an unsplit launch; passes run one after
  // another on the stream). Elsewhere the launch converts the cache as without the permission.
  void offer_fp8_tensor_cores(kernels::PagedAttentionParams& p,
                              const SplitWorkspaceView& split) const {
    if (!params_.fp8_tensor_cores || p.max_num_splits != 1 || p.pass_requests != nullptr ||
        split.out == nullptr || kernels::paged_attention_fp8_workspace_bytes(p) > split.out_bytes) {
      return;
    }
    p.fp8_tensor_cores = true;
    p.fp8_workspace = split.out;
    p.fp8_workspace_bytes = split.out_bytes;
  }

  // The decode kernel's launch of a step's decode pass, writing `out`.
  kernels::DecodeAttentionParams decode_params(const TensorView& query, const KVCacheView& kv_cache,
                                               const KVScales& scales, const DecodePass& decode,
                                               const PassOutput& out) const {
    kernels::DecodeAttentionParams p;
    fill_layer(p, query, kv_cache, scales);
    p.block_table = decode.block_table;
    p.block_table_stride = decode.block_table_stride;
    set_output(p, out);
    p.plan = decode.plan;
    p.partial_out = decode.partial_out;
    p.partial_lse = decode.partial_lse;
    p.num_ctas = decode.num_ctas;
    return p;
  }

  // Whether forward runs under decode context parallelism: a sharded step, or a layer whose
  // dcp_group has other ranks to meet (forward_dcp then refuses an unsharded step).
  bool runs_dcp(const DcpStep& dcp) const {
    return dcp.enabled || (params_.dcp_group != nullptr && params_.dcp_group->world_size() > 1);
  }

  // forward under decode context parallelism (dcp_forward.h): the checks every rank passes alike,
  // then the passes through the paged kernels, the combine and the merge, on `stream`.
  Status forward_dcp(std::string_view backend, const DcpStep& dcp, const StepInfo& step,
                     bool for_cudagraph_capture, const TensorView& query, const TensorView& key,
                     const TensorView& value, const KVCacheView& kv_cache, const KVScales& scales,
                     const TensorView& output, const TensorView& output_lse,
                     LaunchGenerations& generations, StreamHandle stream) const {
    PAGEDATTN_RETURN_IF_ERROR(
        check_dcp_forward(backend, dcp, step, for_cudagraph_capture, params_, query, key, value));
    const kernels::PagedAttentionParams layer_launch =
        paged_layer_params(query, kv_cache, scales, dcp.num_tokens, dcp.context_split);
    const auto launch = [&](kernels::PagedAttentionParams p, const PassMetadata& pass) -> Status {
      // An unsplit launch writes no partials: the workspace bounds split launches only.
      const int64_t capacity = pass.max_splits_used > 1 ? dcp.context_split.token_capacity
                                                        : std::numeric_limits<int64_t>::max();
      PAGEDATTN_RETURN_IF_ERROR(set_pass(p, pass, pass.max_splits_used, capacity));
      generations.choose(p, pass.kernel);
      return kernels::launch_paged_attention(p, stream);
    };
    return run_dcp_forward(dcp, params_, layer_launch, heads_.sinks(), query, key, value, scales,
                           output, output_lse, launch, stream);
  }

  template <typename P>
  void set_output(P& p, const PassOutput& out) const {
    p.out = out.out;
    p.out_token_stride = out.token_stride;
    p.out_head_stride = out.head_stride;
    p.lse = out.lse;
    p.lse_head_stride = out.lse_head_stride;
    p.sinks = out.with_sinks ? heads_.sinks() : nullptr;
  }

  DType cache_dtype_;  // what the cache stores (FP8 caches: the FP8 dtype)
  HeadParams heads_;
};

}  // namespace pagedattn::gpu
