// CPU_ATTN's forward: checks the call against the layer and the step's metadata, describes the
// batch as one attention pass, and runs it (or cascade, when the step has a common prefix, or the
// DCP forward, when the layer has a dcp_group).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "backends/cache_checks.h"
#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/cpu_impl.h"
#include "common/numeric.h"

namespace pagedattn::cpu {

Status check_rows(const TensorView& t, std::string_view what, DType dtype, int64_t min_tokens,
                  int heads, int dim) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {dtype}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(t, what, Device::cpu()));
  if (t.size(0) < min_tokens || t.size(1) != heads || t.size(2) != dim) {
    return invalid_argument(std::string(what) + " is " + t.describe() +
                            "; expected [>= " + std::to_string(min_tokens) + ", " +
                            std::to_string(heads) + ", " + std::to_string(dim) + "]");
  }
  if (t.stride(2) != 1) {
    return invalid_argument(std::string(what) + " must have unit stride along head_size, got " +
                            std::to_string(t.stride(2)));
  }
  return ok_status();
}

namespace {

// Block ids of every request must address this cache, with the builder's block size.
Status check_cache(const KVCacheView& kv_cache, const AttentionImplParams& p,
                   const CpuAttentionMetadata& md) {
  const DType storage = cache_storage_dtype(p);
  PAGEDATTN_RETURN_IF_ERROR(
      backends::check_kv_cache(kv_cache, {storage, is_fp8(p.kv_cache_dtype) ? DType::kU8 : storage},
                               Device::cpu(), p.num_kv_heads, p.head_size, p.kv_layout));
  if (kv_cache.block_size() != md.block_size) {
    return invalid_argument("kv_cache block size " + std::to_string(kv_cache.block_size()) +
                            " differs from the builder's block_size " +
                            std::to_string(md.block_size));
  }
  const int64_t num_blocks = kv_cache.num_blocks();
  const TensorView& table = md.block_table;
  if (table.size(1) > 1 && table.stride(1) != 1) {
    return invalid_argument("block_table must have unit stride along blocks, got " +
                            table.describe());
  }
  for (int r = 0; r < md.num_reqs; ++r) {
    // Under DCP the table holds this rank's blocks: those of its share of the sequence.
    const int64_t needed =
        (dcp_local_length(md.seq_lens[r], md.dcp) + md.block_size - 1) / md.block_size;
    for (int64_t c = 0; c < needed; ++c) {
      const int64_t id = table.data_as<const int32_t>()[r * table.stride(0) + c * table.stride(1)];
      if (id < 0 || id >= num_blocks) {
        return invalid_argument("block_table[" + std::to_string(r) + "][" + std::to_string(c) +
                                "] = " + std::to_string(id) + " is outside kv_cache's blocks [0, " +
                                std::to_string(num_blocks) + ")");
      }
    }
  }
  return ok_status();
}

const float* scale_data(const TensorView& scale) {
  return scale.defined() ? scale.data_as<const float>() : nullptr;
}

// 0 for a per-tensor scale, the element stride for a per-head one.
int64_t scale_stride(const TensorView& scale) {
  return scale.defined() && scale.size(0) > 1 ? scale.stride(0) : 0;
}

// Checks the call and describes the batch as one attention pass (plain attention).
Status prepare_pass(const AttentionImplParams& p, const TensorView& query, const TensorView& key,
                    const TensorView& value, const KVCacheView& kv_cache,
                    const CpuAttentionMetadata& md, const TensorView& output,
                    const TensorView& output_lse, const KVScales& scales, AttentionPass& pass) {
  PAGEDATTN_RETURN_IF_ERROR(backends::check_layer_spec(md.layer, p));
  if (p.dcp_group == nullptr && md.dcp.world_size > 1) {
    return invalid_argument("metadata is dcp_rank " + std::to_string(md.dcp.rank) +
                            " of dcp_world_size " + std::to_string(md.dcp.world_size) +
                            " but the layer has no dcp_group (allowed: dcp_world_size 1 without "
                            "one)");
  }
  const int64_t num_real_tokens = md.query_start_loc[md.num_reqs];
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(query, "query", p.dtype, num_real_tokens, p.num_heads, p.head_size));
  const int64_t num_tokens = query.size(0);
  PAGEDATTN_RETURN_IF_ERROR(
      check_rows(output, "output", p.dtype, num_tokens, p.num_heads, p.head_size));
  if (output.size(0) != num_tokens) {
    return invalid_argument("output has " + std::to_string(output.size(0)) + " tokens, query has " +
                            std::to_string(num_tokens));
  }
  if (output_lse.defined()) {
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(output_lse, "output_lse", {DType::kF32}));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(output_lse, "output_lse", Device::cpu()));
    PAGEDATTN_RETURN_IF_ERROR(expect_shape(output_lse, "output_lse", {p.num_heads, num_tokens}));
  }

  pass.query = query.data();
  pass.query_dtype = query.dtype();
  pass.q_token_stride = query.stride(0);
  pass.q_head_stride = query.stride(1);
  pass.output = output.data();
  pass.output_dtype = output.dtype();
  pass.o_token_stride = output.stride(0);
  pass.o_head_stride = output.stride(1);
  if (output_lse.defined()) {
    pass.lse = output_lse.data_as<float>();
    pass.lse_head_stride = output_lse.stride(0);
    pass.lse_token_stride = output_lse.stride(1);
  }
  pass.num_heads = p.num_heads;
  pass.num_kv_heads = p.num_kv_heads;
  pass.head_size = p.head_size;
  pass.scale = p.resolved_scale();
  pass.soft_cap = p.logits_soft_cap > 0.0f ? p.logits_soft_cap : 0.0f;
  pass.alibi_slopes = p.alibi_slopes.empty() ? nullptr : p.alibi_slopes.data();
  pass.sinks = p.sinks.empty() ? nullptr : p.sinks.data();
  pass.window = p.sliding_window;
  pass.causal = p.causal_in_step(md.causal);

  // Encoder attention has no cache, nor does encoder-only attention given none: each request
  // attends to its own new tokens.
  const bool encoder = p.attn_type == AttentionType::kEncoder ||
                       (p.attn_type == AttentionType::kEncoderOnly && !kv_cache.defined());
  if (encoder) {
    PAGEDATTN_RETURN_IF_ERROR(
        check_rows(key, "key", p.dtype, num_real_tokens, p.num_kv_heads, p.head_size));
    PAGEDATTN_RETURN_IF_ERROR(
        check_rows(value, "value", p.dtype, num_real_tokens, p.num_kv_heads, p.head_size));
    if (key.stride(0) != value.stride(0) || key.stride(1) != value.stride(1)) {
      return invalid_argument("key and value must share strides for encoder attention");
    }
    pass.kv.k_base = key.data();
    pass.kv.v_base = value.data();
    pass.kv.dtype = key.dtype();
    pass.kv.token_stride = key.stride(0);
    pass.kv.head_stride = key.stride(1);
  } else {
    PAGEDATTN_RETURN_IF_ERROR(check_cache(kv_cache, p, md));
    if (is_fp8(p.kv_cache_dtype)) PAGEDATTN_RETURN_IF_ERROR(check_scales(scales, p.num_kv_heads));
    pass.kv.k_base = kv_cache.key().data();
    pass.kv.v_base = kv_cache.value().data();
    pass.kv.dtype = cache_storage_dtype(p);  // u8 storage holds FP8 codes
    pass.kv.block_stride = kv_cache.key().stride(0);
    pass.kv.token_stride = kv_cache.key().stride(1);
    pass.kv.head_stride = kv_cache.key().stride(2);
    pass.kv.block_size = md.block_size;
    if (is_fp8(p.kv_cache_dtype)) {
      pass.kv.k_scale = scale_data(scales.k_scale);
      pass.kv.v_scale = scale_data(scales.v_scale);
      pass.kv.k_scale_stride = scale_stride(scales.k_scale);
      pass.kv.v_scale_stride = scale_stride(scales.v_scale);
    }
  }

  pass.requests.resize(md.num_reqs);
  for (int r = 0; r < md.num_reqs; ++r) {
    RequestPass& rp = pass.requests[r];
    rp.q_start = md.query_start_loc[r];
    rp.q_len = md.query_start_loc[r + 1] - md.query_start_loc[r];
    const int seq_len = md.seq_lens[r];
    if (encoder) {
      if (seq_len != rp.q_len) {
        return invalid_argument("encoder attention needs seq_len == query_len; request " +
                                std::to_string(r) + " has seq_len " + std::to_string(seq_len) +
                                ", query_len " + std::to_string(rp.q_len));
      }
      rp.token_base = rp.q_start;
    } else {
      rp.blocks = md.block_table.data_as<const int32_t>() + r * md.block_table.stride(0);
    }
    rp.query_pos0 = seq_len - rp.q_len;
    rp.kv_len = seq_len;
    rp.key_pos0 = 0;
  }
  return ok_status();
}

}  // namespace

void write_padding_rows(const AttentionPass& pass, int64_t first_token,
                        const TensorView& output) {
  for (int64_t t = first_token; t < output.size(0); ++t) {
    for (int h = 0; h < pass.num_heads; ++h) {
      for (int d = 0; d < pass.head_size; ++d) {
        store_from_float(output.data(), output.dtype(),
                         t * output.stride(0) + h * output.stride(1) + d, 0.0f);
      }
      if (pass.lse != nullptr) {
        pass.lse[h * pass.lse_head_stride + t * pass.lse_token_stride] =
            -std::numeric_limits<float>::infinity();
      }
    }
  }
}

Status run_forward(const AttentionImplParams& p, const TensorView& query, const TensorView& key,
                   const TensorView& value, const KVCacheView& kv_cache,
                   const CpuAttentionMetadata& md, const TensorView& output,
                   const TensorView& output_lse, const KVScales& scales) {
  AttentionPass pass;
  const Status ready =
      prepare_pass(p, query, key, value, kv_cache, md, output, output_lse, scales, pass);
  // Under DCP every rank learns of any rank's refusal, so none is left waiting in a collective.
  if (p.dcp_group != nullptr) {
    return run_dcp_forward(ready, pass, p, md, query, key, value, output, output_lse, scales);
  }
  PAGEDATTN_RETURN_IF_ERROR(ready);
  write_padding_rows(pass, md.query_start_loc[md.num_reqs], output);

  // Cascade's passes keep absolute positions, so ALiBi and windows stay exact. (Encoder steps
  // never get here with a prefix: their requests have no context to hold one.)
  if (md.common_prefix_len > 0) return run_cascade(pass, md, output, output_lse);
  run_attention_pass(pass);
  return ok_status();
}

}  // namespace pagedattn::cpu
