// FLASH_ATTN's impl (vLLM's FlashAttentionImpl, research/vllm_backends.md 2.5-2.7): the cache write
// and the forward. forward is CUDA-graph safe by construction: it checks shapes on the host (no
// synchronisation, no allocation), fills PagedAttentionParams from the tensors and the builder's
// metadata, and launches; every data-dependent choice was made in build().
//
// Cascade (research 4.2): prefix pass (every query token as one request, non-causal, block-table
// row 0, seqused [cpl], sinks here only) + suffix pass (block table offset by cpl / block_size,
// seqused = seq - cpl) + merge_attn_states. A cascade step is not graph-capturable (vLLM's rule:
// the runner never captures one); it is only ever run eagerly.
#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "runtime/device_buffer.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/flash_attn/metadata.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/cache_write.h"
#include "runtime/check.h"
#include "kernels/merge_states.h"

namespace pagedattn::flash_attn {
namespace {

using runtime::DeviceBuffer;

std::string str(int64_t v) { return std::to_string(v); }

Status expect_rows(const TensorView& t, std::string_view what, int64_t min_tokens, int64_t heads,
                   int64_t head_size, DType dtype, const Device& device) {
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {dtype}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(t, what, device));
  if (t.size(0) < min_tokens || t.size(1) != heads || t.size(2) != head_size || t.stride(2) != 1) {
    return invalid_argument(std::string(what) + " is " + t.describe() + "; expected [>= " +
                            str(min_tokens) + ", " + str(heads) + ", " + str(head_size) +
                            "] with a contiguous head dim");
  }
  return ok_status();
}

Status upload(const std::vector<float>& host, int device, DeviceBuffer& buffer) {
  if (host.empty()) return ok_status();
  PAGEDATTN_ASSIGN_OR_RETURN(buffer, DeviceBuffer::allocate(device, 4 * host.size()));
  runtime::ScopedDevice guard(device);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), host.data(), 4 * host.size(), cudaMemcpyHostToDevice),
      "uploading per-head parameters");
  return ok_status();
}

class FlashAttnImpl final : public AttentionImpl {
 public:
  explicit FlashAttnImpl(const AttentionImplParams& params)
      : AttentionImpl(params), cache_dtype_(kv_cache_storage_dtype(params.kv_cache_dtype, params.dtype)) {}

  Status init() {
    const int dev = params_.device.index;
    PAGEDATTN_RETURN_IF_ERROR(upload(params_.alibi_slopes, dev, alibi_));
    PAGEDATTN_RETURN_IF_ERROR(upload(params_.sinks, dev, sinks_));
    return upload({1.0f}, dev, unit_scale_);
  }

  std::string_view kernel_generation() const override { return "v2"; }

  Status do_kv_cache_update(const TensorView& key, const TensorView& value, const TensorView& kv_cache,
                            const TensorView& slot_mapping, const KVScales& scales,
                            StreamHandle stream) override {
    PAGEDATTN_RETURN_IF_ERROR(check_cache(kv_cache));
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(key, "key", {params_.dtype}));
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(value, "value", {params_.dtype}));
    return kernels::launch_cache_write(key, value, kv_cache, slot_mapping, scales.k_scale,
                                       scales.v_scale, stream);
  }

  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                 const TensorView& output, const TensorView& output_lse, const KVScales& scales,
                 StreamHandle stream) override {
    const auto* md = dynamic_cast<const FlashAttnMetadata*>(&metadata);
    if (md == nullptr) {
      return invalid_argument("FLASH_ATTN forward needs metadata from a FLASH_ATTN builder");
    }
    PAGEDATTN_RETURN_IF_ERROR(check_forward(query, kv_cache, *md, output, output_lse, scales));
    const int num_tokens = md->num_actual_tokens;
    if (num_tokens == 0 || md->num_reqs == 0) return ok_status();
    runtime::ScopedDevice guard(params_.device.index);  // launches go to the current device
    PAGEDATTN_RETURN_IF_ERROR(guard.status());

    kernels::PagedAttentionParams p = base_params(query, kv_cache, scales, num_tokens);
    p.split_out = md->split_out;
    p.split_lse = md->split_lse;
    // A captured launch keeps its grid for every replay, so it takes the graph-safe split bound;
    // an eager launch takes this step's own largest count. (Asking is not a synchronisation.)
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture), "cudaStreamIsCapturing");
    const bool capturing = capture != cudaStreamCaptureStatusNone;

    if (!md->use_cascade) {
      PAGEDATTN_RETURN_IF_ERROR(set_pass(p, md->main, capturing, md->split_token_capacity));
      set_output(p, output.data(), output.stride(0), output.stride(1),
                 output_lse.defined() ? output_lse.data_as<float>() : nullptr,
                 output_lse.defined() ? output_lse.stride(0) : 0);
      return kernels::launch_paged_attention(p, stream);
    }

    if (params_.alibi_slopes.size() > 0 || params_.sliding_window.enabled()) {
      return invalid_argument("cascade attention cannot run with ALiBi or a sliding window "
                              "(use_cascade_attention rejects them)");
    }
    const int64_t row = int64_t{params_.num_heads} * params_.head_size;
    kernels::PagedAttentionParams prefix = p;
    PAGEDATTN_RETURN_IF_ERROR(set_pass(prefix, md->prefix, capturing, md->split_token_capacity));
    set_output(prefix, md->prefix_out, row, params_.head_size, md->prefix_lse, md->scratch_lse_stride);
    PAGEDATTN_RETURN_IF_ERROR(kernels::launch_paged_attention(prefix, stream));

    kernels::PagedAttentionParams suffix = p;
    suffix.sinks = nullptr;  // counted once, in the prefix pass
    PAGEDATTN_RETURN_IF_ERROR(set_pass(suffix, md->main, capturing, md->split_token_capacity));
    set_output(suffix, md->suffix_out, row, params_.head_size, md->suffix_lse, md->scratch_lse_stride);
    PAGEDATTN_RETURN_IF_ERROR(kernels::launch_paged_attention(suffix, stream));

    const Device device = query.device();
    const int64_t t = md->cascade_tokens, h = params_.num_heads, d = params_.head_size;
    const int64_t rows_shape[] = {t, h, d}, rows_strides[] = {row, d, 1};
    const int64_t lse_shape[] = {h, t}, lse_strides[] = {md->scratch_lse_stride, 1};
    const TensorView prefix_rows(md->prefix_out, params_.dtype, device, rows_shape, rows_strides);
    const TensorView suffix_rows(md->suffix_out, params_.dtype, device, rows_shape, rows_strides);
    const TensorView prefix_lse(md->prefix_lse, DType::kF32, device, lse_shape, lse_strides);
    const TensorView suffix_lse(md->suffix_lse, DType::kF32, device, lse_shape, lse_strides);
    const int64_t out_strides[] = {output.stride(0), output.stride(1), 1};
    const TensorView out(output.data(), output.dtype(), device, rows_shape, out_strides);
    TensorView out_lse;
    if (output_lse.defined()) {
      const int64_t out_lse_strides[] = {output_lse.stride(0), output_lse.stride(1)};
      out_lse = TensorView(output_lse.data(), DType::kF32, device, lse_shape, out_lse_strides);
    }
    return kernels::launch_merge_attn_states(out, prefix_rows, prefix_lse, suffix_rows, suffix_lse,
                                             out_lse, t, stream);
  }

 private:
  Status check_cache(const TensorView& kv_cache) const {
    PAGEDATTN_RETURN_IF_ERROR(expect_rank(kv_cache, "kv_cache", 5));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(kv_cache, "kv_cache", params_.device));
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(kv_cache, "kv_cache", {cache_dtype_}));
    if (kv_cache.size(1) != 2 || kv_cache.size(3) != params_.num_kv_heads ||
        kv_cache.size(4) != params_.head_size || kv_cache.stride(4) != 1) {
      return invalid_argument("kv_cache is " + kv_cache.describe() + "; expected [num_blocks, 2, "
                              "block_size, " + str(params_.num_kv_heads) + ", " +
                              str(params_.head_size) + "] with a contiguous head dim");
    }
    return ok_status();
  }

  Status check_scale(const TensorView& scale, std::string_view what) const {
    if (!scale.defined()) return ok_status();
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(scale, what, {DType::kF32}));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(scale, what, params_.device));
    if (scale.numel() != 1 && scale.numel() != params_.num_kv_heads) {
      return invalid_argument(std::string(what) + " has " + str(scale.numel()) +
                              " elements; expected 1 or num_kv_heads = " + str(params_.num_kv_heads));
    }
    return ok_status();
  }

  Status check_forward(const TensorView& query, const TensorView& kv_cache,
                       const FlashAttnMetadata& md, const TensorView& output,
                       const TensorView& output_lse, const KVScales& scales) const {
    const int64_t t = md.num_actual_tokens;
    if (md.num_heads != params_.num_heads || md.num_kv_heads != params_.num_kv_heads ||
        md.head_size != params_.head_size) {
      return invalid_argument("metadata was built for heads " + str(md.num_heads) + "/" +
                              str(md.num_kv_heads) + ", head_size " + str(md.head_size) +
                              "; this layer has " + str(params_.num_heads) + "/" +
                              str(params_.num_kv_heads) + ", " + str(params_.head_size));
    }
    if (md.device_index != params_.device.index) {
      return invalid_argument("metadata was built for cuda:" + str(md.device_index) +
                              "; this layer runs on " + device_name(params_.device));
    }
    PAGEDATTN_RETURN_IF_ERROR(expect_rows(query, "query", t, params_.num_heads, params_.head_size,
                                          params_.dtype, params_.device));
    PAGEDATTN_RETURN_IF_ERROR(expect_rows(output, "output", t, params_.num_heads, params_.head_size,
                                          params_.dtype, params_.device));
    if (output_lse.defined()) {
      PAGEDATTN_RETURN_IF_ERROR(expect_rank(output_lse, "output_lse", 2));
      PAGEDATTN_RETURN_IF_ERROR(expect_dtype(output_lse, "output_lse", {DType::kF32}));
      PAGEDATTN_RETURN_IF_ERROR(expect_device(output_lse, "output_lse", params_.device));
      if (output_lse.size(0) != params_.num_heads || output_lse.size(1) < t ||
          (output_lse.size(1) > 1 && output_lse.stride(1) != 1)) {
        return invalid_argument("output_lse is " + output_lse.describe() + "; expected [" +
                                str(params_.num_heads) + ", >= " + str(t) + "] f32, contiguous rows");
      }
    }
    PAGEDATTN_RETURN_IF_ERROR(check_cache(kv_cache));
    if (kv_cache.size(2) != md.block_size) {
      return invalid_argument("kv_cache block size " + str(kv_cache.size(2)) +
                              " differs from the builder's block_size " + str(md.block_size));
    }
    PAGEDATTN_RETURN_IF_ERROR(check_scale(scales.k_scale, "k_scale"));
    PAGEDATTN_RETURN_IF_ERROR(check_scale(scales.v_scale, "v_scale"));
    if (scales.k_scale.defined() != scales.v_scale.defined() ||
        (scales.k_scale.defined() && scales.k_scale.numel() != scales.v_scale.numel())) {
      return invalid_argument("k_scale and v_scale must both be given (same size) or both be left out");
    }
    return ok_status();
  }

  kernels::PagedAttentionParams base_params(const TensorView& query, const TensorView& kv_cache,
                                            const KVScales& scales, int num_tokens) const {
    kernels::PagedAttentionParams p;
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
    const auto scale_ptr = [&](const TensorView& s) {
      return s.defined() ? s.data_as<const float>() : unit_scale_.as<const float>();
    };
    p.k_scale = scale_ptr(scales.k_scale);
    p.v_scale = scale_ptr(scales.v_scale);
    p.per_head_scales = scales.k_scale.defined() && scales.k_scale.numel() > 1;
    p.num_tokens = num_tokens;
    p.num_heads = params_.num_heads;
    p.num_kv_heads = params_.num_kv_heads;
    p.head_size = params_.head_size;
    p.block_size = static_cast<int>(kv_cache.size(2));
    p.scale = params_.resolved_scale();
    p.softcap = params_.logits_soft_cap > 0.0f ? params_.logits_soft_cap : 0.0f;
    p.alibi_slopes = alibi_.as<const float>();
    p.sinks = sinks_.as<const float>();
    p.window_left = params_.sliding_window.left;
    p.window_right = params_.sliding_window.right;
    return p;
  }

  static Status set_pass(kernels::PagedAttentionParams& p, const PassMetadata& pass, bool capturing,
                         int64_t token_capacity) {
    p.cu_seqlens_q = pass.cu_seqlens_q;
    p.seqused_k = pass.seqused_k;
    p.block_table = pass.block_table;
    p.block_table_stride = pass.block_table_stride;
    p.num_reqs = pass.num_reqs;
    p.max_query_len = pass.max_query_len;
    p.max_seq_len = pass.max_seq_len;
    p.causal = pass.causal;
    p.max_num_splits = capturing ? pass.max_num_splits : pass.max_splits_used;
    p.num_splits_per_req = p.max_num_splits > 1 ? pass.num_splits_per_req : nullptr;
    if (int64_t{p.max_num_splits} * p.num_tokens > token_capacity) {
      return internal_error("split workspace too small: " + str(p.max_num_splits) + " splits x " +
                            str(p.num_tokens) + " tokens > " + str(token_capacity));
    }
    return ok_status();
  }

  static void set_output(kernels::PagedAttentionParams& p, void* out, int64_t token_stride,
                         int64_t head_stride, float* lse, int64_t lse_head_stride) {
    p.out = out;
    p.out_token_stride = token_stride;
    p.out_head_stride = head_stride;
    p.lse = lse;
    p.lse_head_stride = lse_head_stride;
  }

  DType cache_dtype_;
  DeviceBuffer alibi_;       // [num_heads] f32 or empty
  DeviceBuffer sinks_;       // [num_heads] f32 or empty
  DeviceBuffer unit_scale_;  // [1] f32 = 1.0, for FP8 caches given no scales
};

}  // namespace

StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params) {
  if (!params.device.is_cuda()) {
    return invalid_argument("FLASH_ATTN impl: device is " + device_name(params.device) +
                            "; expected a CUDA device");
  }
  if (params.dtype != DType::kF16 && params.dtype != DType::kBF16) {
    return invalid_argument("FLASH_ATTN impl: dtype " + std::string(dtype_name(params.dtype)) +
                            "; expected f16 or bf16 (f32 runs on the CPU backend)");
  }
  if (params.num_heads <= 0 || params.num_kv_heads <= 0 || params.num_heads % params.num_kv_heads) {
    return invalid_argument("FLASH_ATTN impl: num_heads = " + str(params.num_heads) +
                            ", num_kv_heads = " + str(params.num_kv_heads) +
                            "; expected positive counts with num_heads % num_kv_heads == 0");
  }
  int major = 0, minor = 0;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, params.device.index),
      "reading the compute capability");
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, params.device.index),
      "reading the compute capability");
  const int version =
      flash_attn_version({major, minor}, params.head_size, !params.alibi_slopes.empty());
  if (version != 2) {
    return invalid_argument("FLASH_ATTN impl: no kernel generation serves head_size " +
                            str(params.head_size) + " on compute capability " + str(major) + "." +
                            str(minor) + " in this build (v2 needs sm_80+ and a built head size)");
  }
  const auto per_head = [&](const std::vector<float>& v, std::string_view what) -> Status {
    if (v.empty() || static_cast<int>(v.size()) == params.num_heads) return ok_status();
    return invalid_argument("FLASH_ATTN impl: " + std::string(what) + " has " + str(v.size()) +
                            " entries; expected num_heads = " + str(params.num_heads) + " or none");
  };
  PAGEDATTN_RETURN_IF_ERROR(per_head(params.alibi_slopes, "alibi_slopes"));
  PAGEDATTN_RETURN_IF_ERROR(per_head(params.sinks, "sinks"));
  auto impl = std::make_unique<FlashAttnImpl>(params);
  PAGEDATTN_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<AttentionImpl>(std::move(impl));
}

}  // namespace pagedattn::flash_attn
