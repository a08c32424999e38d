// CPU_ATTN under decode context parallelism (docs/dcp.md), as vLLM's FlashAttention backend runs
// it: the query of every rank's heads is gathered; (a) all the group's heads attend, non-causally,
// the context tokens this rank stores; (b) the ranks combine those partial results by LSE (ag_rs or
// a2a), each keeping its own head slice; (c) this rank's heads attend the step's new tokens, read
// from key/value, causally; (d) merge_attn_states of (b) and (c). Sinks join (c) only: once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_impl.h"
#include "backends/cpu/output_rows.h"
#include "pagedattn/communicator.h"
#include "pagedattn/dcp_combine.h"
#include "pagedattn/dcp_heads.h"
#include "pagedattn/ops.h"

namespace pagedattn::cpu {
namespace {

TensorView host_view(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  return TensorView(data, dtype, Device::cpu(), shape);
}

// The checks only this path needs: the metadata is this rank's, and the new tokens' K/V are given.
Status check_dcp_call(const Communicator& group, const AttentionImplParams& p,
                      const CpuAttentionMetadata& md, const TensorView& key,
                      const TensorView& value) {
  if (md.dcp.world_size != group.world_size() || md.dcp.rank != group.rank()) {
    return invalid_argument("metadata is dcp_rank " + std::to_string(md.dcp.rank) +
                            " of dcp_world_size " + std::to_string(md.dcp.world_size) +
                            "; the layer's dcp_group is rank " + std::to_string(group.rank()) +
                            " of " + std::to_string(group.world_size()) + " (they must agree)");
  }
  const int64_t num_tokens = md.query_start_loc[md.num_reqs];
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(key, "key", p.dtype, num_tokens, p.num_kv_heads, p.head_size));
  return check_rows(value, "value", p.dtype, num_tokens, p.num_kv_heads, p.head_size);
}

// Every rank learns whether all are ready and run the same number of tokens, so that one rank's
// refusal fails the step everywhere instead of leaving the others waiting in a collective.
Status agree_on_step(Communicator& group, const Status& ready, int64_t num_tokens) {
  int32_t mine[2] = {ready.ok() ? 1 : 0, static_cast<int32_t>(num_tokens)};
  std::vector<int32_t> all(2 * static_cast<size_t>(group.world_size()));
  PAGEDATTN_RETURN_IF_ERROR(
      group.all_gather(host_view(mine, DType::kI32, {2}),
                       host_view(all.data(), DType::kI32, {static_cast<int64_t>(all.size())})));
  PAGEDATTN_RETURN_IF_ERROR(ready);
  for (int s = 0; s < group.world_size(); ++s) {
    if (all[2 * s] == 0) {
      return invalid_argument("dcp rank " + std::to_string(s) +
                              " refused its forward call (its Status says why): every rank of "
                              "the group fails the step");
    }
    if (all[2 * s + 1] != num_tokens) {
      return invalid_argument("dcp rank " + std::to_string(s) + " runs " +
                              std::to_string(all[2 * s + 1]) + " tokens, this rank " +
                              std::to_string(num_tokens) + " (every rank runs the same step)");
    }
  }
  return ok_status();
}

// The group's query [T, N * Hq, D]: this rank's rows gathered from every rank, rank s's heads at
// [s * Hq, (s + 1) * Hq).
Status gather_query(Communicator& group, const TensorView& query, int64_t num_tokens,
                    std::vector<std::byte>& group_query) {
  const int64_t ranks = group.world_size();
  const int64_t heads = query.size(1);
  const int64_t row_bytes = query.size(2) * static_cast<int64_t>(dtype_size(query.dtype()));
  thread_local std::vector<std::byte> mine, gathered;
  mine.resize(num_tokens * heads * row_bytes);
  gathered.resize(ranks * mine.size());
  group_query.resize(gathered.size());
  const int64_t elem = static_cast<int64_t>(dtype_size(query.dtype()));
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(&mine[(t * heads + h) * row_bytes],
                  static_cast<const std::byte*>(query.data()) +
                      (t * query.stride(0) + h * query.stride(1)) * elem,
                  row_bytes);
    }
  }
  const int64_t elements = num_tokens * heads * query.size(2);
  PAGEDATTN_RETURN_IF_ERROR(
      group.all_gather(host_view(mine.data(), query.dtype(), {elements}),
                       host_view(gathered.data(), query.dtype(), {ranks * elements})));
  const int64_t slice_bytes = heads * row_bytes;  // one rank's heads of one token
  for (int64_t s = 0; s < ranks; ++s) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      std::memcpy(&group_query[(t * ranks + s) * slice_bytes],
                  &gathered[(s * num_tokens + t) * slice_bytes], slice_bytes);
    }
  }
  return ok_status();
}

// (a): the group's heads over this rank's context keys, non-causal. A window cuts at absolute
// positions: each row keeps its own, and the mask counts the rank's keys inside (mask.h's key
// shard).
AttentionPass context_pass(const AttentionPass& plain, const CpuAttentionMetadata& md,
                           const void* group_query, int group_heads) {
  AttentionPass pass = plain;
  pass.query = group_query;
  pass.num_heads = group_heads;
  pass.q_token_stride = static_cast<int64_t>(group_heads) * plain.head_size;
  pass.q_head_stride = plain.head_size;
  pass.causal = false;   // every context key precedes every new token
  pass.sinks = nullptr;  // they join the new tokens' pass, once
  pass.key_shard = md.dcp;
  for (int r = 0; r < md.num_reqs; ++r) {
    pass.requests[r].kv_len = md.dcp_context_lens[r];
    pass.requests[r].key_pos0 = 0;
  }
  return pass;
}

// (c): this rank's heads over the step's new tokens, staged in the cache's storage format first (so
// that FP8 and 16-bit caches read them as the cache would), at their absolute positions.
Status own_tokens_pass(const AttentionPass& plain, const AttentionImplParams& p,
                       const CpuAttentionMetadata& md, const TensorView& key,
                       const TensorView& value, const KVScales& scales, int64_t num_tokens,
                       std::vector<std::byte>& staged, AttentionPass& pass) {
  const DType storage = cache_storage_dtype(p);
  const int64_t plane = num_tokens * p.num_kv_heads * p.head_size;
  staged.resize(2 * plane * dtype_size(storage));
  thread_local std::vector<int64_t> slots;
  slots.resize(num_tokens);
  for (int64_t t = 0; t < num_tokens; ++t) slots[t] = t;
  AttentionImplParams staging = p;
  staging.kv_layout = KVCacheLayout::kNHD;
  std::byte* k_stage = staged.data();
  std::byte* v_stage = staged.data() + plane * dtype_size(storage);
  const KVCacheView stage(
      host_view(k_stage, storage, {1, num_tokens, p.num_kv_heads, p.head_size}),
      host_view(v_stage, storage, {1, num_tokens, p.num_kv_heads, p.head_size}));
  PAGEDATTN_RETURN_IF_ERROR(write_kv_cache(
      staging, key, value, stage, host_view(slots.data(), DType::kI64, {num_tokens}), scales));

  const DcpKvHeads kv = dcp_kv_heads_of_rank(p.num_kv_heads, md.dcp.world_size, md.dcp.rank);
  const int64_t first_head_bytes = int64_t{kv.first} * p.head_size * dtype_size(storage);
  pass = plain;
  pass.num_kv_heads = kv.count;
  pass.kv.k_base = k_stage + first_head_bytes;
  pass.kv.v_base = v_stage + first_head_bytes;
  pass.kv.dtype = storage;
  pass.kv.block_stride = 0;
  pass.kv.token_stride = int64_t{p.num_kv_heads} * p.head_size;
  pass.kv.head_stride = p.head_size;
  pass.kv.block_size = 1;
  if (pass.kv.k_scale != nullptr) pass.kv.k_scale += kv.first * pass.kv.k_scale_stride;
  if (pass.kv.v_scale != nullptr) pass.kv.v_scale += kv.first * pass.kv.v_scale_stride;
  for (RequestPass& rp : pass.requests) {
    rp.blocks = nullptr;
    rp.token_base = rp.q_start;
    rp.kv_len = rp.q_len;
    rp.key_pos0 = rp.query_pos0;
  }
  return ok_status();
}

}  // namespace

Status run_dcp_forward(const Status& ready, const AttentionPass& plain,
                       const AttentionImplParams& p, const CpuAttentionMetadata& md,
                       const TensorView& query, const TensorView& key, const TensorView& value,
                       const TensorView& output, const TensorView& output_lse,
                       const KVScales& scales) {
  Communicator& group = *p.dcp_group;
  const int64_t num_tokens = md.query_start_loc[md.num_reqs];
  Status mine = ready;
  if (mine.ok()) mine = check_dcp_call(group, p, md, key, value);
  PAGEDATTN_RETURN_IF_ERROR(agree_on_step(group, mine, num_tokens));
  write_padding_rows(plain, num_tokens, output);
  if (num_tokens == 0) return ok_status();

  const int64_t heads = p.num_heads;
  const int64_t dim = p.head_size;
  const int group_heads = group.world_size() * p.num_heads;
  // Reused across calls (every element is written before it is read): no allocation per step.
  thread_local std::vector<std::byte> group_query, staged;
  thread_local std::vector<float> partial_out, partial_lse, context_out, context_lse, own_out,
      own_lse;
  partial_out.resize(num_tokens * group_heads * dim);
  partial_lse.resize(int64_t{group_heads} * num_tokens);
  for (std::vector<float>* v : {&context_out, &own_out}) {
    v->resize(num_tokens * heads * dim);
  }
  for (std::vector<float>* v : {&context_lse, &own_lse}) v->resize(heads * num_tokens);

  PAGEDATTN_RETURN_IF_ERROR(gather_query(group, query, num_tokens, group_query));
  AttentionPass context = context_pass(plain, md, group_query.data(), group_heads);
  redirect_to_float_rows(context, partial_out.data(), partial_lse.data(), num_tokens);
  run_attention_pass(context);

  auto rows = [&](std::vector<float>& v, int64_t h) {
    return host_view(v.data(), DType::kF32, {num_tokens, h, dim});
  };
  auto lses = [&](std::vector<float>& v, int64_t h) {
    return host_view(v.data(), DType::kF32, {h, num_tokens});
  };
  PAGEDATTN_RETURN_IF_ERROR(dcp_combine(group, p.dcp_comm_backend, rows(partial_out, group_heads),
                                        lses(partial_lse, group_heads), rows(context_out, heads),
                                        lses(context_lse, heads)));

  AttentionPass own;
  PAGEDATTN_RETURN_IF_ERROR(
      own_tokens_pass(plain, p, md, key, value, scales, num_tokens, staged, own));
  redirect_to_float_rows(own, own_out.data(), own_lse.data(), num_tokens);
  run_attention_pass(own);

  store_merged_rows({context_out.data(), context_lse.data()}, {own_out.data(), own_lse.data()},
                    num_tokens, heads, dim, output, output_lse);
  return ok_status();
}

}  // namespace pagedattn::cpu
