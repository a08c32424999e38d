// The float64 oracle: semantics.md computed the obvious way, one (token, head) row at a time.
#include "reference/attention_ref.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "common/mask.h"

namespace pagedattn::reference {
namespace {

int32_t host_i32(const TensorView& t, int64_t i, int64_t j = 0) {
  const int64_t offset = i * t.stride(0) + (t.rank() > 1 ? j * t.stride(1) : 0);
  return t.data_as<const int32_t>()[offset];
}

// The FP8 dequantization scale of `kv_head`: [1] per tensor, [Hkv] per head, undefined = 1.
double scale_of(const TensorView& scale, int kv_head) {
  if (!scale.defined()) return 1.0;
  const int64_t index = scale.numel() == 1 ? 0 : kv_head;
  return load_as_float(scale.data(), scale.dtype(), index * scale.stride(0));
}

// Four partial sums only for speed (large cases); in float64 the summation order is immaterial.
double dot(const double* a, const double* b, int n) {
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    for (int l = 0; l < 4; ++l) part[l] += a[d + l] * b[d + l];
  }
  for (; d < n; ++d) part[0] += a[d] * b[d];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

Status validate(const ReferenceInputs& in, const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(in.query, "query", 3));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(in.kv_cache, "kv_cache", 5));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(in.block_table, "block_table", 2));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(in.seq_lens, "seq_lens", 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(in.query_start_loc, "query_start_loc", 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(in.block_table, "block_table", {DType::kI32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(in.seq_lens, "seq_lens", {DType::kI32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(in.query_start_loc, "query_start_loc", {DType::kI32}));
  const int64_t num_tokens = in.query.size(0);
  const int64_t num_reqs = in.seq_lens.size(0);
  const int block_size = static_cast<int>(in.kv_cache.size(2));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(in.query, "query", {num_tokens, params.num_heads, params.head_size}));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(in.kv_cache, "kv_cache",
                   {in.kv_cache.size(0), 2, block_size, params.num_kv_heads, params.head_size}));
  PAGEDATTN_RETURN_IF_ERROR(expect_shape(in.query_start_loc, "query_start_loc", {num_reqs + 1}));
  if (params.num_kv_heads <= 0 || params.num_heads % params.num_kv_heads != 0) {
    return invalid_argument("num_heads " + std::to_string(params.num_heads) +
                            " must be a multiple of num_kv_heads " +
                            std::to_string(params.num_kv_heads));
  }
  if (host_i32(in.query_start_loc, 0) != 0 ||
      host_i32(in.query_start_loc, num_reqs) != num_tokens) {
    return invalid_argument("query_start_loc must run from 0 to num_tokens " +
                            std::to_string(num_tokens));
  }
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int32_t q_len = host_i32(in.query_start_loc, r + 1) - host_i32(in.query_start_loc, r);
    const int32_t seq_len = host_i32(in.seq_lens, r);
    const int64_t num_blocks = (seq_len + block_size - 1) / block_size;
    if (q_len < 0 || q_len > seq_len || num_blocks > in.block_table.size(1)) {
      return invalid_argument("request " + std::to_string(r) + ": query_len " +
                              std::to_string(q_len) + ", seq_len " + std::to_string(seq_len) +
                              " do not fit (0 <= query_len <= seq_len <= block_table columns * " +
                              "block_size)");
    }
    for (int64_t b = 0; b < num_blocks; ++b) {
      const int32_t block = host_i32(in.block_table, r, b);
      if (block < 0 || block >= in.kv_cache.size(0)) {
        return invalid_argument("block_table[" + std::to_string(r) + "][" + std::to_string(b) +
                                "] = " + std::to_string(block) + " is not a cache block");
      }
    }
  }
  if (!params.alibi_slopes.empty() &&
      static_cast<int>(params.alibi_slopes.size()) != params.num_heads) {
    return invalid_argument("alibi_slopes must have num_heads entries");
  }
  if (!params.sinks.empty() && static_cast<int>(params.sinks.size()) != params.num_heads) {
    return invalid_argument("sinks must have num_heads entries");
  }
  return ok_status();
}

}  // namespace

StatusOr<ReferenceOutputs> reference_attention(const ReferenceInputs& in,
                                               const AttentionImplParams& params) {
  PAGEDATTN_RETURN_IF_ERROR(validate(in, params));
  const TensorView& cache = in.kv_cache;
  const int64_t num_tokens = in.query.size(0);
  const int num_heads = params.num_heads;
  const int head_size = params.head_size;
  const int group = num_heads / params.num_kv_heads;
  const int block_size = static_cast<int>(cache.size(2));
  const double scale = params.resolved_scale();
  // The visibility and score transforms are the kernels' own (common/mask.h), in double.
  const bool capped = params.logits_soft_cap > 0.0f;
  const mask::SoftCap<double> cap =
      capped ? mask::make_soft_cap(scale, double{params.logits_soft_cap}, 1.0)
             : mask::SoftCap<double>{0.0, 0.0};
  const mask::MaskRule rule{params.causal_in_step(in.causal), params.sliding_window.left,
                            params.sliding_window.right};
  const double neg_inf = -std::numeric_limits<double>::infinity();

  ReferenceOutputs result;
  result.out.assign(num_tokens * num_heads * head_size, 0.0);
  result.lse.assign(num_heads * num_tokens, neg_inf);

  // Key (plane 0) or value (plane 1) j of request r, kv head kvh, element d: dequantized.
  auto cache_at = [&](int64_t r, int plane, int64_t j, int kvh, int d) {
    const int64_t block = host_i32(in.block_table, r, j / block_size);
    const int64_t offset = block * cache.stride(0) + plane * cache.stride(1) +
                           (j % block_size) * cache.stride(2) + kvh * cache.stride(3) +
                           d * cache.stride(4);
    const double stored = load_as_float(cache.data(), cache.dtype(), offset);
    if (!is_fp8(cache.dtype())) return stored;
    return stored * scale_of(plane == 0 ? in.scales.k_scale : in.scales.v_scale, kvh);
  };

  const int num_kv_heads = params.num_kv_heads;
  const int64_t num_reqs = in.seq_lens.size(0);
  const bool has_sink = !params.sinks.empty();
  std::vector<double> keys;    // [seq_len, D] of the current request and KV head
  std::vector<double> values;  // [seq_len, D]
  std::vector<double> q;       // [q_len * group, D]: the query rows reading this KV head
  std::vector<double> scores;  // [q_len * group, seq_len], -inf where masked
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int64_t q_start = host_i32(in.query_start_loc, r);
    const int64_t q_len = host_i32(in.query_start_loc, r + 1) - q_start;
    const int64_t seq_len = host_i32(in.seq_lens, r);
    const int64_t context_len = seq_len - q_len;
    if (q_len == 0) continue;
    // Row i of a KV head's work is query token i / group, head kvh * group + i % group.
    const int64_t rows = q_len * group;
    for (int kvh = 0; kvh < num_kv_heads; ++kvh) {
      // Gather this request's keys and values through the block table.
      keys.resize(seq_len * head_size);
      values.resize(seq_len * head_size);
      for (int64_t j = 0; j < seq_len; ++j) {
        for (int d = 0; d < head_size; ++d) {
          keys[j * head_size + d] = cache_at(r, 0, j, kvh, d);
          values[j * head_size + d] = cache_at(r, 1, j, kvh, d);
        }
      }
      q.resize(rows * head_size);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t t = q_start + i / group;
        const int h = kvh * group + static_cast<int>(i % group);
        for (int d = 0; d < head_size; ++d) {
          q[i * head_size + d] = load_as_float(
              in.query.data(), in.query.dtype(),
              t * in.query.stride(0) + h * in.query.stride(1) + d * in.query.stride(2));
        }
      }
      // Scores of every visible (row, key) pair; each key is read once for all rows.
      scores.assign(rows * seq_len, neg_inf);
      for (int64_t j = 0; j < seq_len; ++j) {
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t p = context_len + i / group;  // absolute position of the query token
          const mask::KeyRange<int64_t> visible = mask::visible_keys<int64_t>(rule, seq_len, p);
          if (j < visible.lo || j > visible.hi) continue;
          const double raw = dot(&q[i * head_size], &keys[j * head_size], head_size);
          double s = capped ? mask::soft_capped(cap, raw) : scale * raw;
          if (!params.alibi_slopes.empty()) {
            s -= mask::alibi_bias(double{params.alibi_slopes[kvh * group + i % group]}, p, j);
          }
          scores[i * seq_len + j] = s;
        }
      }
      // Softmax per row (the sink joins the denominator only), then the weighted values.
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t t = q_start + i / group;
        const int h = kvh * group + static_cast<int>(i % group);
        double* row = &scores[i * seq_len];
        double m = has_sink ? static_cast<double>(params.sinks[h]) : neg_inf;
        for (int64_t j = 0; j < seq_len; ++j) m = std::fmax(m, row[j]);
        if (m == neg_inf) continue;  // nothing visible and no sink: out = 0, lse = -inf
        double denom = has_sink ? std::exp(params.sinks[h] - m) : 0.0;
        for (int64_t j = 0; j < seq_len; ++j) {
          row[j] = row[j] == neg_inf ? 0.0 : std::exp(row[j] - m);
          denom += row[j];
        }
        double* out = &result.out[(t * num_heads + h) * head_size];
        for (int64_t j = 0; j < seq_len; ++j) {
          if (row[j] == 0.0) continue;
          for (int d = 0; d < head_size; ++d) out[d] += row[j] * values[j * head_size + d];
        }
        for (int d = 0; d < head_size; ++d) out[d] /= denom;
        result.lse[h * num_tokens + t] = m + std::log(denom);
      }
    }
  }
  return result;
}

}  // namespace pagedattn::reference
