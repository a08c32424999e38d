// CPU_ATTN's metadata builder: validates the step's CommonAttentionMetadata and keeps host copies.
// Cascade follows the one contract (backends/common_prefix.h): the prefix it is given runs.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/builder_base.h"
#include "backends/builder_limits.h"
#include "backends/common_prefix.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_metadata.h"
#include "backends/cpu/last_level_cache.h"

namespace pagedattn::cpu {
namespace {

int read_i32(const TensorView& t, int64_t i) {
  return t.data_as<const int32_t>()[i * t.stride(0)];
}

class CpuMetadataBuilder final : public backends::BuilderBase {
 public:
  explicit CpuMetadataBuilder(const BuilderParams& params) : BuilderBase(params) {}

  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::kNever; }

  // The shared rule, where one layer's shared keys outgrow the last-level cache: below that, plain
  // attention reads them from the cache for every request after the first, and a cascade only
  // adds a pass and a merge (docs/cpu.md).
  bool use_cascade_attention(int common_prefix_len, std::span<const int32_t> query_lens,
                             int num_query_heads, int num_kv_heads, bool use_alibi,
                             bool use_sliding_window, bool use_local_attention, int num_sms,
                             int dcp_world_size) const override {
    const int64_t shared_bytes = int64_t{common_prefix_len} * 2 * num_kv_heads * params_.head_size *
                                 static_cast<int64_t>(dtype_size(kv_cache_storage_dtype(
                                     params_.kv_cache_dtype, params_.dtype)));
    return shared_bytes > last_level_cache_bytes() &&
           BuilderBase::use_cascade_attention(common_prefix_len, query_lens, num_query_heads,
                                              num_kv_heads, use_alibi, use_sliding_window,
                                              use_local_attention, num_sms, dcp_world_size);
  }

  StatusOr<std::unique_ptr<AttentionMetadata>> build(int common_prefix_len,
                                                     const CommonAttentionMetadata& meta) override {
    PAGEDATTN_RETURN_IF_ERROR(backends::check_step_limits(params_, meta));
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
    md->layer = backends::layer_spec(params_);
    md->block_size = params_.block_size;
    md->block_table = meta.block_table_tensor;
    md->query_start_loc.resize(meta.num_reqs + 1);
    md->seq_lens.resize(meta.num_reqs);
    for (int r = 0; r <= meta.num_reqs; ++r) {
      md->query_start_loc[r] = read_i32(meta.query_start_loc_cpu, r);
    }
    for (int r = 0; r < meta.num_reqs; ++r) md->seq_lens[r] = read_i32(meta.seq_lens_cpu, r);
    md->dcp = meta.dcp_shard();
    if (md->dcp.world_size > 1) {
      std::vector<int32_t> context_lens(meta.num_reqs);
      for (int r = 0; r < meta.num_reqs; ++r) {
        context_lens[r] = md->seq_lens[r] - (md->query_start_loc[r + 1] - md->query_start_loc[r]);
      }
      md->dcp_context_lens.resize(meta.num_reqs);
      PAGEDATTN_RETURN_IF_ERROR(
          dcp_local_seq_lens(context_lens, md->dcp, params_.block_size, md->dcp_context_lens));
      // As in vLLM: a shared prefix would be sharded like any context, and no pass reads it once.
      if (common_prefix_len != 0) {
        return invalid_argument("common_prefix_len = " + std::to_string(common_prefix_len) +
                                " with dcp_world_size = " + std::to_string(md->dcp.world_size) +
                                ": CPU_ATTN runs no cascade under decode context parallelism, as "
                                "vLLM (allowed: 0)");
      }
    }

    // The caller decided (use_cascade_attention); the prefix runs as cascade whenever it is given,
    // with every feature: the passes keep absolute positions (ALiBi distances, windows).
    PAGEDATTN_RETURN_IF_ERROR(meta.validate_common_prefix(common_prefix_len, params_.block_size));
    PAGEDATTN_RETURN_IF_ERROR(backends::check_cascade_deterministic("CPU_ATTN", common_prefix_len,
                                                                    params_.deterministic));
    md->common_prefix_len = common_prefix_len;
    return std::unique_ptr<AttentionMetadata>(std::move(md));
  }
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
  PAGEDATTN_RETURN_IF_ERROR(check_served(params.head_size, params.dtype));
  PAGEDATTN_RETURN_IF_ERROR(backends::check_limits(params));
  if (params.num_sms != 0) {
    return invalid_argument("num_sms = " + std::to_string(params.num_sms) +
                            ": CPU_ATTN plans no GPU work (allowed: 0; its threads are "
                            "PAGEDATTN_CPU_THREADS)");
  }
  return std::unique_ptr<AttentionMetadataBuilder>(std::make_unique<CpuMetadataBuilder>(params));
}

}  // namespace pagedattn::cpu
