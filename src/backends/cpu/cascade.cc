// Cascade attention on CPU: the shared prefix once for all query tokens (non-causal, sinks here
// only), the rest per request, merged by LSE with merge_attn_states. Equals plain attention.
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_impl.h"
#include "backends/cpu/output_rows.h"

namespace pagedattn::cpu {

Status run_cascade(const AttentionPass& plain, const CpuAttentionMetadata& md,
                   const TensorView& output, const TensorView& output_lse) {
  const int64_t num_tokens = md.query_start_loc[md.num_reqs];
  if (num_tokens == 0) return ok_status();
  const int64_t heads = plain.num_heads;
  const int64_t dim = plain.head_size;
  const int prefix_len = md.common_prefix_len;
  const int prefix_blocks = prefix_len / md.block_size;
  const int64_t elements = num_tokens * heads * dim;
  // Reused across calls (every element is written before it is read): no allocation per step.
  thread_local std::vector<float> prefix_out, suffix_out, prefix_lse, suffix_lse;
  for (std::vector<float>* v : {&prefix_out, &suffix_out}) v->resize(elements);
  for (std::vector<float>* v : {&prefix_lse, &suffix_lse}) v->resize(heads * num_tokens);

  // Prefix: every query token sees every shared key (they all precede it). The shared blocks are
  // request 0's first blocks, the same ids in every row.
  AttentionPass prefix = plain;
  redirect_to_float_rows(prefix, prefix_out.data(), prefix_lse.data(), num_tokens);
  prefix.causal = false;
  const int32_t* shared_blocks = md.block_table.data_as<const int32_t>();
  for (RequestPass& rp : prefix.requests) {
    rp.blocks = shared_blocks;
    rp.kv_len = prefix_len;
    rp.key_pos0 = 0;
  }
  // Without ALiBi or a window no score depends on a row's position: the rows of every request
  // run as one, so that each tile of shared keys is read once for all of them.
  if (plain.alibi_slopes == nullptr && !plain.window.enabled()) {
    RequestPass every_row = prefix.requests.front();
    every_row.q_start = 0;
    every_row.q_len = static_cast<int>(num_tokens);
    every_row.query_pos0 = prefix_len;
    prefix.requests.assign(1, every_row);
  }
  run_attention_pass(prefix);

  // Suffix: per request, causal over its own blocks after the prefix, no sinks.
  AttentionPass suffix = plain;
  redirect_to_float_rows(suffix, suffix_out.data(), suffix_lse.data(), num_tokens);
  suffix.sinks = nullptr;
  for (RequestPass& rp : suffix.requests) {
    rp.blocks += prefix_blocks;
    rp.kv_len -= prefix_len;
    rp.key_pos0 = prefix_len;
  }
  run_attention_pass(suffix);

  store_merged_rows({prefix_out.data(), prefix_lse.data()}, {suffix_out.data(), suffix_lse.data()},
                    num_tokens, heads, dim, output, output_lse);
  return ok_status();
}

}  // namespace pagedattn::cpu
