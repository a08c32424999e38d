// FLASH_ATTN's metadata builder (vLLM's FlashAttentionMetadataBuilder, research/vllm_backends.md
// 2.4). It owns persistent device buffers sized once from BuilderParams, so that every step's
// metadata lives at the same addresses (what a captured CUDA graph replays against):
//   - the split-KV schedule, decided on the host by plan::plan_split_kv and copied in build();
//   - the split workspace (f32 partial outputs and LSEs);
//   - the cascade buffers: prefix cu_seqlens [0, T], prefix seqused [cpl], suffix seqused
//     (seq_lens - cpl), and the two passes' output/LSE scratch (allocated on the first cascade step).
// reorder_batch_threshold stays unset: one kernel serves mixed prefill/decode batches in any order.
//
// Ordering: build() copies with cudaMemcpyAsync on the legacy default stream, which waits for
// earlier work on every blocking stream (the previous step's forward may still read these
// buffers) and is waited for by later work. Callers that run forward on non-blocking streams must
// order build() against them themselves, as with any persistent-buffer builder.
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "runtime/device_buffer.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/flash_attn/metadata.h"
#include "kernels/attention/paged_attention.h"
#include "runtime/check.h"
#include "pagedattn/ops.h"
#include "plan/split_kv.h"

namespace pagedattn::flash_attn {
namespace {

using runtime::DeviceBuffer;

std::string str(int64_t v) { return std::to_string(v); }

Status check_device_vector(const TensorView& t, std::string_view what, int device) {
  if (!t.device().is_cuda() || t.device().index != device) {
    return invalid_argument(std::string(what) + " must be on cuda:" + str(device) + ", got " +
                            t.describe());
  }
  if (t.rank() >= 1 && t.size(0) > 1 && t.stride(t.rank() - 1) != 1) {
    return invalid_argument(std::string(what) + " must be contiguous in its last dim, got " +
                            t.describe());
  }
  return ok_status();
}

class FlashAttnMetadataBuilder final : public AttentionMetadataBuilder {
 public:
  explicit FlashAttnMetadataBuilder(const BuilderParams& params, int num_sms)
      : params_(params), num_sms_(num_sms) {}

  Status init() {
    const int dev = params_.device.index;
    layout_ = plan::split_workspace_layout(params_.max_num_tokens, params_.num_heads,
                                           params_.head_size);
    PAGEDATTN_ASSIGN_OR_RETURN(splits_, DeviceBuffer::allocate(dev, 4 * params_.max_num_reqs));
    PAGEDATTN_ASSIGN_OR_RETURN(suffix_seq_, DeviceBuffer::allocate(dev, 4 * params_.max_num_reqs));
    PAGEDATTN_ASSIGN_OR_RETURN(prefix_meta_, DeviceBuffer::allocate(dev, 4 * kPrefixMetaInts));
    PAGEDATTN_ASSIGN_OR_RETURN(split_out_, DeviceBuffer::allocate(dev, 4 * layout_.out_floats));
    PAGEDATTN_ASSIGN_OR_RETURN(split_lse_, DeviceBuffer::allocate(dev, 4 * layout_.lse_floats));
    return ok_status();
  }

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kAlways; }

  bool use_cascade_attention(int common_prefix_len, std::span<const int32_t> query_lens,
                             int num_query_heads, int num_kv_heads, bool use_alibi,
                             bool use_sliding_window, bool use_local_attention, int num_sms,
                             int dcp_world_size) const override {
    return cascade_attention_pays_off(common_prefix_len, query_lens, num_query_heads, num_kv_heads,
                                      use_alibi, use_sliding_window, use_local_attention, num_sms,
                                      dcp_world_size);
  }

  StatusOr<std::unique_ptr<AttentionMetadata>> build(int common_prefix_len,
                                                     const CommonAttentionMetadata& meta) override {
    PAGEDATTN_RETURN_IF_ERROR(check_step(meta));
    const int num_reqs = meta.num_reqs;
    const int num_tokens = meta.num_actual_tokens;
    const std::span<const int32_t> qsl(meta.query_start_loc_cpu.data_as<const int32_t>(),
                                       static_cast<size_t>(num_reqs) + 1);
    const std::span<const int32_t> seqs(meta.seq_lens_cpu.data_as<const int32_t>(),
                                        static_cast<size_t>(num_reqs));
    const int dev = params_.device.index;
    runtime::ScopedDevice guard(dev);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());

    auto md = std::make_unique<FlashAttnMetadata>();
    md->device_index = dev;
    md->num_heads = params_.num_heads;
    md->num_kv_heads = params_.num_kv_heads;
    md->head_size = params_.head_size;
    md->block_size = params_.block_size;
    md->num_reqs = num_reqs;
    md->num_actual_tokens = num_tokens;
    md->split_out = split_out_.as<float>();
    md->split_lse = split_lse_.as<float>();
    md->split_token_capacity = layout_.token_splits;

    plan::SplitKVConfig config;
    config.num_sms = num_sms_;
    config.num_heads = params_.num_heads;
    config.num_kv_heads = params_.num_kv_heads;
    config.head_size = kernels::paged_attention_kernel_head_size(params_.head_size);
    config.block_size = params_.block_size;
    config.window_left = params_.sliding_window.left;
    config.max_splits =
        plan::graph_safe_max_splits(num_tokens, layout_.token_splits, params_.num_heads,
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

    std::span<const int32_t> main_seqs = seqs;
    if (common_prefix_len > 0) {
      PAGEDATTN_RETURN_IF_ERROR(build_cascade(common_prefix_len, meta, qsl, seqs, config, *md));
      main_seqs = std::span<const int32_t>(suffix_seq_host_.data(), suffix_seq_host_.size());
    }
    PAGEDATTN_ASSIGN_OR_RETURN(const plan::SplitSchedule schedule,
                               plan::plan_split_kv(qsl, main_seqs, config));
    main.max_splits_used = schedule.max_splits_used;
    splits_host_ = schedule.num_splits_per_req;
    if (num_reqs > 0) {
      PAGEDATTN_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(splits_.data(), splits_host_.data(), 4 * splits_host_.size(),
                          cudaMemcpyHostToDevice, nullptr),
          "copying the split schedule");
    }
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }

 private:
  // prefix_meta_ ints: [0, T] (cu_seqlens of the prefix pass), cpl (its seqused), its split count.
  static constexpr int kPrefixMetaInts = 4;

  Status check_step(const CommonAttentionMetadata& meta) const {
    if (meta.num_reqs > params_.max_num_reqs) {
      return invalid_argument("num_reqs = " + str(meta.num_reqs) + " exceeds the builder's max_num_reqs = " +
                              str(params_.max_num_reqs));
    }
    if (meta.num_actual_tokens > params_.max_num_tokens) {
      return invalid_argument("num_actual_tokens = " + str(meta.num_actual_tokens) +
                              " exceeds the builder's max_num_tokens = " + str(params_.max_num_tokens));
    }
    if (meta.max_seq_len > params_.max_model_len) {
      return invalid_argument("max_seq_len = " + str(meta.max_seq_len) +
                              " exceeds the builder's max_model_len = " + str(params_.max_model_len));
    }
    // The builder does not know the cache size; block ids are checked where the table is on the host.
    const int64_t any_blocks = std::numeric_limits<int64_t>::max() / params_.block_size;
    PAGEDATTN_RETURN_IF_ERROR(meta.validate(params_.block_size, any_blocks));
    const int dev = params_.device.index;
    PAGEDATTN_RETURN_IF_ERROR(check_device_vector(meta.query_start_loc, "query_start_loc", dev));
    PAGEDATTN_RETURN_IF_ERROR(check_device_vector(meta.seq_lens, "seq_lens", dev));
    PAGEDATTN_RETURN_IF_ERROR(check_device_vector(meta.block_table_tensor, "block_table_tensor", dev));
    return ok_status();
  }

  Status build_cascade(int cpl, const CommonAttentionMetadata& meta, std::span<const int32_t> qsl,
                       std::span<const int32_t> seqs, const plan::SplitKVConfig& config,
                       FlashAttnMetadata& md) {
    const int num_reqs = meta.num_reqs;
    if (cpl % params_.block_size != 0) {
      return invalid_argument("common_prefix_len = " + str(cpl) + " must be a multiple of block_size = " +
                              str(params_.block_size));
    }
    if (num_reqs == 0) return invalid_argument("common_prefix_len = " + str(cpl) + " with no requests");
    suffix_seq_host_.resize(num_reqs);
    for (int r = 0; r < num_reqs; ++r) {
      const int context = seqs[r] - (qsl[r + 1] - qsl[r]);
      if (cpl > context) {
        return invalid_argument("common_prefix_len = " + str(cpl) + " exceeds request " + str(r) +
                                "'s context length " + str(context) +
                                " (the prefix may hold no query token)");
      }
      suffix_seq_host_[r] = seqs[r] - cpl;
    }
    PAGEDATTN_RETURN_IF_ERROR(ensure_cascade_scratch());
    // Only the real tokens: padding rows have no suffix pass to merge with.
    const int num_tokens = qsl[num_reqs];
    const int prefix_blocks = cpl / params_.block_size;
    // The prefix pass is one request of every query token: split it like a long query.
    const int prefix_splits = plan::choose_num_splits(
        plan::request_ctas(num_tokens, params_.num_heads, params_.num_kv_heads, config.head_size),
        0, prefix_blocks, plan::min_blocks_per_split(params_.block_size), num_sms_,
        config.max_splits);
    prefix_meta_host_ = {0, num_tokens, cpl, prefix_splits};
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(prefix_meta_.data(), prefix_meta_host_.data(), 4 * kPrefixMetaInts,
                        cudaMemcpyHostToDevice, nullptr),
        "copying the cascade prefix metadata");
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(suffix_seq_.data(), suffix_seq_host_.data(), 4 * num_reqs,
                        cudaMemcpyHostToDevice, nullptr),
        "copying the cascade suffix lengths");

    md.use_cascade = true;
    md.common_prefix_len = cpl;
    md.cascade_tokens = num_tokens;
    const int32_t* prefix_ints = prefix_meta_.as<const int32_t>();
    PassMetadata& prefix = md.prefix;
    prefix.cu_seqlens_q = prefix_ints;
    prefix.seqused_k = prefix_ints + 2;
    prefix.block_table = md.main.block_table;  // row 0: every request shares these blocks
    prefix.block_table_stride = md.main.block_table_stride;
    prefix.num_reqs = 1;
    prefix.max_query_len = num_tokens;
    prefix.max_seq_len = cpl;
    prefix.causal = false;
    prefix.num_splits_per_req = prefix_ints + 3;
    prefix.max_num_splits = config.max_splits;
    prefix.max_splits_used = prefix_splits;

    PassMetadata& suffix = md.main;
    suffix.seqused_k = suffix_seq_.as<const int32_t>();
    suffix.block_table += prefix_blocks;  // the suffix's key 0 is key cpl of the request
    suffix.max_seq_len = std::max(0, meta.max_seq_len - cpl);

    md.prefix_out = prefix_out_.data();
    md.suffix_out = suffix_out_.data();
    md.prefix_lse = prefix_lse_.as<float>();
    md.suffix_lse = suffix_lse_.as<float>();
    md.scratch_lse_stride = params_.max_num_tokens;
    md.scratch_dtype = params_.dtype;
    return ok_status();
  }

  Status ensure_cascade_scratch() {
    if (prefix_out_.data() != nullptr) return ok_status();
    const int dev = params_.device.index;
    const size_t rows = static_cast<size_t>(params_.max_num_tokens) * params_.num_heads;
    const size_t out_bytes = rows * params_.head_size * dtype_size(params_.dtype);
    PAGEDATTN_ASSIGN_OR_RETURN(prefix_out_, DeviceBuffer::allocate(dev, out_bytes));
    PAGEDATTN_ASSIGN_OR_RETURN(suffix_out_, DeviceBuffer::allocate(dev, out_bytes));
    PAGEDATTN_ASSIGN_OR_RETURN(prefix_lse_, DeviceBuffer::allocate(dev, rows * 4));
    PAGEDATTN_ASSIGN_OR_RETURN(suffix_lse_, DeviceBuffer::allocate(dev, rows * 4));
    return ok_status();
  }

  BuilderParams params_;
  int num_sms_ = 0;
  plan::SplitWorkspaceLayout layout_;
  DeviceBuffer splits_;       // [max_num_reqs] int32
  DeviceBuffer suffix_seq_;   // [max_num_reqs] int32
  DeviceBuffer prefix_meta_;  // [kPrefixMetaInts] int32
  DeviceBuffer split_out_;    // [layout_.out_floats] f32
  DeviceBuffer split_lse_;    // [layout_.lse_floats] f32
  DeviceBuffer prefix_out_, suffix_out_;  // [max_num_tokens, Hq, D] dtype
  DeviceBuffer prefix_lse_, suffix_lse_;  // [Hq, max_num_tokens] f32
  // Host staging of the copies (pageable: cudaMemcpyAsync has read them when it returns).
  std::vector<int32_t> splits_host_;
  std::vector<int32_t> suffix_seq_host_;
  std::vector<int32_t> prefix_meta_host_;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params) {
  if (!params.device.is_cuda()) {
    return invalid_argument("FLASH_ATTN builder: device is " + device_name(params.device) +
                            "; expected a CUDA device");
  }
  if (params.num_heads <= 0 || params.num_kv_heads <= 0 || params.num_heads % params.num_kv_heads) {
    return invalid_argument("FLASH_ATTN builder: num_heads = " + str(params.num_heads) +
                            ", num_kv_heads = " + str(params.num_kv_heads) +
                            "; expected positive counts with num_heads % num_kv_heads == 0");
  }
  if (kernels::paged_attention_kernel_head_size(params.head_size) == 0) {
    return invalid_argument("FLASH_ATTN builder: head_size = " + str(params.head_size) +
                            " has no kernel in this build (PAGEDATTN_HEAD_SIZES)");
  }
  if (params.block_size <= 0 || params.block_size % 16 != 0) {
    return invalid_argument("FLASH_ATTN builder: block_size = " + str(params.block_size) +
                            "; expected a multiple of 16");
  }
  if (params.max_num_reqs <= 0 || params.max_num_tokens <= 0 || params.max_model_len <= 0) {
    return invalid_argument("FLASH_ATTN builder: max_num_reqs, max_num_tokens and max_model_len must be "
                            "positive, got " + str(params.max_num_reqs) + ", " +
                            str(params.max_num_tokens) + ", " + str(params.max_model_len));
  }
  if (params.dtype != DType::kF16 && params.dtype != DType::kBF16) {
    return invalid_argument("FLASH_ATTN builder: dtype " + std::string(dtype_name(params.dtype)) +
                            "; expected f16 or bf16");
  }
  int num_sms = params.num_sms;
  if (num_sms <= 0) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, params.device.index),
        "reading the SM count of cuda:" + str(params.device.index));
  }
  auto builder = std::make_unique<FlashAttnMetadataBuilder>(params, num_sms);
  PAGEDATTN_RETURN_IF_ERROR(builder->init());
  return std::unique_ptr<AttentionMetadataBuilder>(std::move(builder));
}

}  // namespace pagedattn::flash_attn
