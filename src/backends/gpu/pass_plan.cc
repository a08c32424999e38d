#include "backends/gpu/pass_plan.h"

#include <algorithm>

#include "kernels/attention/paged_attention.h"
#include "kernels/decode/decode_attention.h"

namespace pagedattn::gpu {

plan::SplitKVConfig split_config(const BuilderParams& params, int num_sms, int num_tokens,
                                 int64_t token_splits) {
  plan::SplitKVConfig config;
  config.num_sms = num_sms;
  config.num_heads = params.num_heads;
  config.num_kv_heads = params.num_kv_heads;
  config.head_size = kernels::paged_attention_kernel_head_size(params.head_size);
  config.block_size = params.block_size;
  config.window_left = params.sliding_window.left;
  config.max_splits = plan::graph_safe_max_splits(num_tokens, token_splits, params.num_heads,
                                                  params.num_kv_heads, config.head_size, num_sms);
  if (params.max_num_splits > 0) config.max_splits = std::min(config.max_splits, params.max_num_splits);
  if (params.deterministic) config.max_splits = 1;
  return config;
}

StepLengths step_lengths(const CommonAttentionMetadata& meta) {
  const auto n = static_cast<size_t>(meta.num_reqs);
  return {{meta.query_start_loc_cpu.data_as<const int32_t>(), n + 1},
          {meta.seq_lens_cpu.data_as<const int32_t>(), n}};
}

PassMetadata pass_metadata(const CommonAttentionMetadata& meta) {
  PassMetadata pass;
  pass.cu_seqlens_q = meta.query_start_loc.data_as<const int32_t>();
  pass.seqused_k = meta.seq_lens.data_as<const int32_t>();
  pass.block_table = meta.block_table_tensor.data_as<const int32_t>();
  pass.block_table_stride = meta.block_table_tensor.stride(0);
  pass.num_reqs = meta.num_reqs;
  pass.max_query_len = meta.max_query_len;
  pass.max_seq_len = meta.max_seq_len;
  pass.causal = meta.causal;
  return pass;
}

int decode_grid_ctas(const BuilderParams& params, int num_sms) {
  return num_sms * kernels::decode_attention_ctas_per_sm(
                       params.head_size, params.dtype,
                       kv_cache_storage_dtype(params.kv_cache_dtype, params.dtype));
}

plan::DecodePlanConfig decode_plan_config(const BuilderParams& params, int decode_ctas) {
  plan::DecodePlanConfig c;
  c.num_ctas = std::max(1, decode_ctas);
  c.num_heads = params.num_heads;
  c.num_kv_heads = params.num_kv_heads;
  c.window_left = params.sliding_window.left;
  c.fixed_chunk_tokens = params.deterministic ? plan::kDeterministicChunkTokens : 0;
  return c;
}

plan::WorkspaceLayout step_workspace_layout(const BuilderParams& params, int decode_ctas) {
  plan::WorkspaceLimits limits;
  limits.max_num_reqs = params.max_num_reqs;
  limits.max_num_tokens = params.max_num_tokens;
  limits.max_model_len = params.max_model_len;
  limits.head_size = params.head_size;
  limits.decode = decode_plan_config(params, decode_ctas);
  return plan::workspace_layout(limits);
}

}  // namespace pagedattn::gpu
