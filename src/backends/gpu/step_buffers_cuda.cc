#include "backends/gpu/step_buffers.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "pagedattn/device_info.h"
#include "runtime/check.h"

namespace pagedattn::gpu {

StatusOr<int> builder_sm_count(const BuilderParams& params) {
  if (params.num_sms > 0) return params.num_sms;
  const CudaDeviceInfo* device = cuda_device(params.device.index);
  if (device == nullptr) {
    return invalid_argument("device cuda:" + std::to_string(params.device.index) +
                            " does not exist on this machine");
  }
  return device->num_sms;
}

using runtime::DeviceBuffer;

Status copy_ints_to_device(const std::vector<int32_t>& host, const DeviceBuffer& device,
                           const std::string& what) {
  if (host.empty()) return ok_status();
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device.data(), host.data(), 4 * host.size(), cudaMemcpyHostToDevice, nullptr),
      "copying " + what);
  return ok_status();
}

StatusOr<SplitWorkspace> SplitWorkspace::allocate(int device,
                                                  const plan::SplitWorkspaceLayout& layout) {
  SplitWorkspace w;
  PAGEDATTN_ASSIGN_OR_RETURN(w.out_, DeviceBuffer::allocate(device, 4 * layout.out_floats));
  PAGEDATTN_ASSIGN_OR_RETURN(w.lse_, DeviceBuffer::allocate(device, 4 * layout.lse_floats));
  w.token_capacity_ = layout.token_splits;
  return w;
}

SplitWorkspaceView SplitWorkspace::view() const {
  return {out_.as<float>(), lse_.as<float>(), token_capacity_, out_.bytes()};
}

StatusOr<CascadeBuilder> CascadeBuilder::create(std::string backend, const BuilderParams& params,
                                                backends::CascadeFeatures served,
                                                int prefix_extra_ints) {
  CascadeBuilder b;
  b.backend_ = std::move(backend);
  b.params_ = params;
  b.served_ = served;
  b.prefix_extra_ints_ = prefix_extra_ints;
  const int dev = params.device.index;
  PAGEDATTN_ASSIGN_OR_RETURN(b.prefix_ints_,
                             DeviceBuffer::allocate(dev, 4 * (3 + prefix_extra_ints)));
  PAGEDATTN_ASSIGN_OR_RETURN(b.suffix_seq_, DeviceBuffer::allocate(dev, 4 * params.max_num_reqs));
  return b;
}

StatusOr<CascadeMetadata> CascadeBuilder::plan(int cpl, const CommonAttentionMetadata& meta,
                                               std::span<const int32_t> qsl,
                                               std::span<const int32_t> seqs) {
  PAGEDATTN_RETURN_IF_ERROR(meta.validate_common_prefix(cpl, params_.block_size));
  PAGEDATTN_RETURN_IF_ERROR(backends::check_cascade_features(
      backend_, cpl, params_.use_alibi, params_.use_sliding_window(), served_));
  PAGEDATTN_RETURN_IF_ERROR(
      backends::check_cascade_deterministic(backend_, cpl, params_.deterministic));
  CascadeMetadata c;
  if (cpl == 0) return c;
  PAGEDATTN_RETURN_IF_ERROR(ensure_scratch());
  suffix_seq_host_.resize(seqs.size());
  for (size_t r = 0; r < seqs.size(); ++r) suffix_seq_host_[r] = seqs[r] - cpl;
  c.enabled = true;
  c.common_prefix_len = cpl;
  c.num_tokens = qsl[meta.num_reqs];  // padding rows have no suffix pass to merge with
  c.prefix_blocks = cpl / params_.block_size;
  c.suffix_max_seq_len = std::max(0, meta.max_seq_len - cpl);
  const int32_t* ints = prefix_ints_.as<const int32_t>();
  c.prefix_cu_seqlens_q = ints;
  c.prefix_seqused_k = ints + 2;
  c.prefix_extra = ints + 3;
  c.suffix_seqused_k = suffix_seq_.as<const int32_t>();
  c.prefix_out = prefix_out_.data();
  c.suffix_out = suffix_out_.data();
  c.prefix_lse = prefix_lse_.as<float>();
  c.suffix_lse = suffix_lse_.as<float>();
  c.lse_stride = params_.max_num_tokens;
  c.dtype = params_.dtype;
  prefix_ints_host_ = {0, c.num_tokens, cpl};
  return c;
}

Status CascadeBuilder::upload(std::span<const int32_t> prefix_extra) {
  if (static_cast<int>(prefix_extra.size()) != prefix_extra_ints_) {
    return internal_error("cascade prefix metadata: " + std::to_string(prefix_extra.size()) +
                          " backend ints, expected " + std::to_string(prefix_extra_ints_));
  }
  prefix_ints_host_.resize(3);
  prefix_ints_host_.insert(prefix_ints_host_.end(), prefix_extra.begin(), prefix_extra.end());
  PAGEDATTN_RETURN_IF_ERROR(
      copy_ints_to_device(prefix_ints_host_, prefix_ints_, "the cascade prefix metadata"));
  return copy_ints_to_device(suffix_seq_host_, suffix_seq_, "the cascade suffix lengths");
}

StatusOr<PassMetadata> CascadeBuilder::split_passes(const CascadeMetadata& c,
                                                    const plan::SplitKVConfig& config,
                                                    int num_sms, PassMetadata& main) {
  const int prefix_splits = plan::choose_num_splits(
      plan::request_ctas(c.num_tokens, params_.num_heads, params_.num_kv_heads, config.head_size),
      0, c.prefix_blocks, plan::min_blocks_per_split(params_.block_size), num_sms,
      config.max_splits);
  PAGEDATTN_RETURN_IF_ERROR(upload(std::span<const int32_t>(&prefix_splits, 1)));
  PassMetadata prefix;
  prefix.cu_seqlens_q = c.prefix_cu_seqlens_q;
  prefix.seqused_k = c.prefix_seqused_k;
  prefix.block_table = main.block_table;  // row 0: every request shares these blocks
  prefix.block_table_stride = main.block_table_stride;
  prefix.num_reqs = 1;
  prefix.max_query_len = c.num_tokens;
  prefix.max_seq_len = c.common_prefix_len;
  prefix.causal = false;
  prefix.num_splits_per_req = c.prefix_extra;  // its one split count
  prefix.max_num_splits = config.max_splits;
  prefix.max_splits_used = prefix_splits;
  main.seqused_k = c.suffix_seqused_k;
  main.block_table += c.prefix_blocks;  // the suffix's key 0 is key cpl of the request
  main.max_seq_len = c.suffix_max_seq_len;
  return prefix;
}

Status CascadeBuilder::ensure_scratch() {
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

}  // namespace pagedattn::gpu
