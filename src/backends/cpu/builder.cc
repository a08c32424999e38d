// CPU_ATTN's metadata builder: validates the step's CommonAttentionMetadata and keeps host copies.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_metadata.h"
#include "backends/cpu/thread_pool.h"
#include "pagedattn/ops.h"

namespace pagedattn::cpu {
namespace {

int read_i32(const TensorView& t, int64_t i) {
  return t.data_as<const int32_t>()[i * t.stride(0)];
}

class CpuMetadataBuilder final : public AttentionMetadataBuilder {
 public:
  explicit CpuMetadataBuilder(const BuilderParams& params) : params_(params) {
    // A CPU "SM" is a thread of the pool forward runs on.
    num_sms_ = params.num_sms > 0 ? params.num_sms : cpu_thread_count();
  }

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kNever; }

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
    // The cache size is not known here; forward checks block ids against the cache it is given.
    PAGEDATTN_RETURN_IF_ERROR(
        meta.validate(params_.block_size, std::numeric_limits<int32_t>::max()));
    if (!meta.block_table_tensor.device().is_cpu()) {
      return invalid_argument("block_table_tensor must be on the host for CPU_ATTN, got " +
                              meta.block_table_tensor.describe());
    }
    auto md = std::make_unique<CpuAttentionMetadata>();
    md->num_reqs = meta.num_reqs;
    md->num_actual_tokens = meta.num_actual_tokens;
    md->max_query_len = meta.max_query_len;
    md->max_seq_len = meta.max_seq_len;
    md->causal = meta.causal;
    md->block_size = params_.block_size;
    md->block_table = meta.block_table_tensor;
    md->query_start_loc.resize(meta.num_reqs + 1);
    md->seq_lens.resize(meta.num_reqs);
    for (int r = 0; r <= meta.num_reqs; ++r) {
      md->query_start_loc[r] = read_i32(meta.query_start_loc_cpu, r);
    }
    for (int r = 0; r < meta.num_reqs; ++r) md->seq_lens[r] = read_i32(meta.seq_lens_cpu, r);

    if (common_prefix_len < 0 || common_prefix_len % params_.block_size != 0) {
      return invalid_argument("common_prefix_len = " + std::to_string(common_prefix_len) +
                              " must be a non-negative multiple of block_size " +
                              std::to_string(params_.block_size));
    }
    if (common_prefix_len > 0) {
      std::vector<int32_t> query_lens(meta.num_reqs);
      for (int r = 0; r < meta.num_reqs; ++r) {
        query_lens[r] = md->query_start_loc[r + 1] - md->query_start_loc[r];
        const int context_len = md->seq_lens[r] - query_lens[r];
        if (common_prefix_len > context_len) {
          return invalid_argument("common_prefix_len = " + std::to_string(common_prefix_len) +
                                  " exceeds request " + std::to_string(r) + "'s context length " +
                                  std::to_string(context_len));
        }
      }
      const bool use_cascade = use_cascade_attention(
          common_prefix_len, query_lens, params_.num_heads, params_.num_kv_heads, params_.use_alibi,
          params_.use_sliding_window(),
          /*use_local_attention=*/false, num_sms_, /*dcp_world_size=*/1);
      md->common_prefix_len = use_cascade ? common_prefix_len : 0;
    }
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }

 private:
  BuilderParams params_;
  int num_sms_ = 1;
};

}  // namespace

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params) {
  if (!params.device.is_cpu()) {
    return invalid_argument("CPU_ATTN builds metadata for the cpu device, got " +
                            device_name(params.device));
  }
  if (params.block_size <= 0) {
    return invalid_argument("block_size = " + std::to_string(params.block_size) +
                            " must be positive");
  }
  if (params.num_heads <= 0 || params.num_kv_heads <= 0 ||
      params.num_heads % params.num_kv_heads != 0) {
    return invalid_argument(
        "num_heads = " + std::to_string(params.num_heads) +
        " must be a positive multiple of num_kv_heads = " + std::to_string(params.num_kv_heads));
  }
  return std::unique_ptr<AttentionMetadataBuilder>(std::make_unique<CpuMetadataBuilder>(params));
}

}  // namespace pagedattn::cpu
