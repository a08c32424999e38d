// The CPU attention kernel for one task, per SIMD target: online softmax over tiles of kKeyTile
// keys; inside a tile, one KV head at a time, its keys and values widened to float once and used
// by every query vector of its group (GQA packing) and every query row of the task, a few query
// vectors at a time so that their partial sums stay in registers.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_ATTENTION_TASK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_ATTENTION_TASK_INL_H_
#undef PAGEDATTN_CPU_ATTENTION_TASK_INL_H_
#else
#define PAGEDATTN_CPU_ATTENTION_TASK_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_kernel_internal.h"
#include "backends/cpu/bf16_dot_ops-inl.h"
#include "backends/cpu/kv_rows-inl.h"
#include "backends/cpu/kv_widen-inl.h"
#include "backends/cpu/onednn_tiles.h"
#include "backends/cpu/output_store-inl.h"
#include "backends/cpu/tile_math-inl.h"
#include "common/mask.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using mask::KeyRange;
using mask::ShardedMaskRule;
using mask::soft_cap_applies;
using mask::visible_keys;

// Query vectors scored together: kQueries x kKeys partial sums in registers, which x86 before
// AVX-512 (16 vector registers) only holds for two queries.
constexpr int kQueries =
    (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3) ? 2 : 4;
static_assert(kQueries <= kQueryBlock);
constexpr int kKeys = 4;           // keys scored together
constexpr int kColumnVectors = 4;  // value columns accumulated together, in vectors
static_assert(kKeyTile % kKeys == 0);

// s[i * kKeyTile + k] = q_i . key k for the kQ query vectors at q (row stride dim) and the keys
// [k0, k1) of the tile, k0 and k1 multiples of kKeys.
template <int kQ, class DF>
HWY_INLINE void score_keys(DF df, const float* HWY_RESTRICT q, const float* HWY_RESTRICT keys,
                           int dim, int k0, int k1, float* HWY_RESTRICT s,
                           TilePrefetcher& prefetcher) {
  using V = hn::Vec<DF>;
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int k = k0; k < k1; k += kKeys) {
    prefetcher.issue();
    const float* key = keys + static_cast<int64_t>(k) * dim;
    V acc[kQ][kKeys];
    for (int i = 0; i < kQ; ++i) {
      for (int j = 0; j < kKeys; ++j) acc[i][j] = hn::Zero(df);
    }
    for (int d = 0; d < dim; d += lanes) {
      V kv[kKeys];
      for (int j = 0; j < kKeys; ++j) kv[j] = hn::LoadU(df, key + j * dim + d);
      for (int i = 0; i < kQ; ++i) {
        const V qv = hn::LoadU(df, q + i * dim + d);
        for (int j = 0; j < kKeys; ++j) acc[i][j] = hn::MulAdd(qv, kv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < kQ; ++i) {
      store_lane_sums(df, acc[i][0], acc[i][1], acc[i][2], acc[i][3], s + i * kKeyTile + k);
    }
  }
}

// acc_i = acc_i * correction_i + sum over keys k in [k0, k1) of w_i[k] * value k, for the kQ query
// vectors, kC vectors of columns from column d on.
template <int kQ, int kC, class DF>
HWY_INLINE void accumulate_columns(DF df, const float* HWY_RESTRICT w,
                                   const float* HWY_RESTRICT correction,
                                   const float* HWY_RESTRICT values, int dim, int k0, int k1, int d,
                                   float* HWY_RESTRICT acc, TilePrefetcher& prefetcher) {
  using V = hn::Vec<DF>;
  prefetcher.issue();
  const int lanes = static_cast<int>(hn::Lanes(df));
  V a[kQ][kC];
  for (int i = 0; i < kQ; ++i) {
    const V c = hn::Set(df, correction[i]);
    for (int j = 0; j < kC; ++j) a[i][j] = hn::Mul(hn::LoadU(df, acc + i * dim + d + j * lanes), c);
  }
  for (int k = k0; k < k1; ++k) {
    const float* row = values + static_cast<int64_t>(k) * dim + d;
    V v[kC];
    for (int j = 0; j < kC; ++j) v[j] = hn::LoadU(df, row + j * lanes);
    for (int i = 0; i < kQ; ++i) {
      const V wi = hn::Set(df, w[i * kKeyTile + k]);
      for (int j = 0; j < kC; ++j) a[i][j] = hn::MulAdd(wi, v[j], a[i][j]);
    }
  }
  for (int i = 0; i < kQ; ++i) {
    for (int j = 0; j < kC; ++j) hn::StoreU(a[i][j], df, acc + i * dim + d + j * lanes);
  }
}

template <int kQ, class DF>
HWY_INLINE void accumulate_values(DF df, const float* HWY_RESTRICT w,
                                  const float* HWY_RESTRICT correction,
                                  const float* HWY_RESTRICT values, int dim, int k0, int k1,
                                  float* HWY_RESTRICT acc, TilePrefetcher& prefetcher) {
  if (k0 >= k1 && std::all_of(correction, correction + kQ, [](float c) { return c == 1.0f; })) {
    return;
  }
  const int lanes = static_cast<int>(hn::Lanes(df));
  int d = 0;
  for (; d + kColumnVectors * lanes <= dim; d += kColumnVectors * lanes) {
    accumulate_columns<kQ, kColumnVectors>(df, w, correction, values, dim, k0, k1, d, acc,
                                           prefetcher);
  }
  for (; d < dim; d += lanes) {
    accumulate_columns<kQ, 1>(df, w, correction, values, dim, k0, k1, d, acc, prefetcher);
  }
}

// Widens keys [first, first + count) of KV heads [h0, h0 + heads) of one plane into `tile`
// ([heads][kKeyTile][dim]; rows past count zeroed, so that whole groups of keys read finite
// numbers). Keys are read in the cache's order, each token's heads together, so that a page
// streams from memory once for every head of the task.
template <class DF>
HWY_INLINE void widen_tile(DF df, const AttentionPass& pass, const RequestPass& rp,
                           const void* base, const float* scales, int64_t scale_stride, int h0,
                           int heads, int first, int count, float* HWY_RESTRICT tile) {
  const KvSource& kv = pass.kv;
  const int dim = pass.head_size;
  const int64_t head_tile = static_cast<int64_t>(kKeyTile) * dim;
  with_dtype(kv.dtype, [&](auto type) {
    for (int i = 0; i < count; ++i) {
      const int64_t row = key_offset(kv, rp, first + i);
      for (int h = 0; h < heads; ++h) {
        const int kv_head = h0 + h;
        const float scale = scales == nullptr ? 1.0f : scales[kv_head * scale_stride];
        widen_scaled<decltype(type)::value>(df, base, row + kv_head * kv.head_stride, dim,
                                            widen_multiplier(kv.dtype, scale),
                                            tile + h * head_tile + static_cast<int64_t>(i) * dim);
      }
    }
  });
  for (int h = 0; h < heads; ++h) {
    float* head = tile + h * head_tile;
    std::fill(head + static_cast<int64_t>(count) * dim, head + head_tile, 0.0f);
  }
}

// Chunks of keys that every query vector of a task sees whole run their two products on oneDNN
// (bf16 in, float out) where it has bf16 dot products: bf16 caches and queries on AVX-512, with no
// ALiBi or soft cap (which would need the scores per key before the softmax sees them).
constexpr bool kChunksOnOnednn = HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL;
constexpr int kMinChunkVectors = 16;  // fewer query vectors per KV head: the tile path is faster
constexpr int kMinChunkKeys = 64;     // fewer keys: the call costs more than it saves

inline bool use_onednn_chunks(const AttentionPass& pass, int per_kv_head) {
  return kChunksOnOnednn && per_kv_head >= kMinChunkVectors && pass.kv.dtype == DType::kBF16 &&
         pass.query_dtype == DType::kBF16 && pass.alibi_slopes == nullptr &&
         !soft_cap_applies(pass.soft_cap) && onednn_tiles_available();
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL  // the only targets that use chunks
// dst[0, n) = src[0, n) rounded to bf16; n a multiple of Lanes(df).
template <class DF>
HWY_INLINE void round_to_bf16(DF df, const float* HWY_RESTRICT src, int n,
                              uint16_t* HWY_RESTRICT dst) {
  const hn::Rebind<uint16_t, DF> du16;
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int i = 0; i < n; i += lanes) {
    hn::StoreU(hn::DemoteTo(du16, bf16_bits(df, hn::LoadU(df, src + i))), du16, dst + i);
  }
}

// The weights e^(scale * s[k] - m) of n finite scores (n a multiple of 32) to p as bf16; returns
// their sum.
template <class DF>
HWY_INLINE float finite_weights(DF df, float scale, float m, const float* HWY_RESTRICT s, int n,
                                uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto vscale = hn::Set(df, scale), vm = hn::Set(df, m);
  auto sum_lanes = hn::Zero(df);
  for (int k = 0; k < n; k += lanes) {
    const auto w = exp_nonpositive(df, hn::MulSub(hn::LoadU(df, s + k), vscale, vm));
    hn::StoreU(hn::DemoteTo(du16, finite_bf16_bits(df, w)), du16, p + k);
    sum_lanes = hn::Add(sum_lanes, w);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum_lanes));
}

#if HWY_TARGET == HWY_AVX3_DL
// The same with AVX512_BF16's conversion, 32 weights per instruction (the same bits: the weights
// are normal floats or 0).
PAGEDATTN_BF16_DOT HWY_NOINLINE float finite_weights_native(float scale, float m,
                                                            const float* HWY_RESTRICT s, int n,
                                                            uint16_t* HWY_RESTRICT p) {
  const hn::ScalableTag<float> df;
  const auto vscale = hn::Set(df, scale), vm = hn::Set(df, m);
  auto sum_lanes = hn::Zero(df);
  for (int k = 0; k < n; k += 32) {
    const auto w0 = exp_nonpositive(df, hn::MulSub(hn::LoadU(df, s + k), vscale, vm));
    const auto w1 = exp_nonpositive(df, hn::MulSub(hn::LoadU(df, s + k + 16), vscale, vm));
    _mm512_storeu_si512(p + k, to_bf16(w0.raw, w1.raw));
    sum_lanes = hn::Add(sum_lanes, hn::Add(w0, w1));
  }
  return hn::GetLane(hn::SumOfLanes(df, sum_lanes));
}
#endif

// Online softmax of one query vector over n raw scores s, all visible: weights of scale * s to p
// (bf16), running max m and denominator l updated; returns the factor its accumulated output must
// be scaled by.
template <class DF>
HWY_INLINE float softmax_chunk(DF df, float scale, const float* HWY_RESTRICT s, int n,
                               uint16_t* HWY_RESTRICT p, float& m, float& l) {
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto vscale = hn::Set(df, scale);
  auto max_lanes = hn::Set(df, kNegInf);
  auto min_lanes = hn::Set(df, std::numeric_limits<float>::infinity());
  auto nan_lanes = hn::Lt(max_lanes, max_lanes);  // all false
  for (int k = 0; k < n; k += lanes) {
    const auto v = hn::Mul(hn::LoadU(df, s + k), vscale);
    max_lanes = hn::Max(max_lanes, v);
    min_lanes = hn::Min(min_lanes, v);
    nan_lanes = hn::Or(nan_lanes, hn::IsNaN(v));
  }
  // A NaN score makes the max NaN, and with it every weight and the output (Max drops NaN).
  const float chunk_max = hn::AllFalse(df, nan_lanes) ? hn::GetLane(hn::MaxOfLanes(df, max_lanes))
                                                      : std::numeric_limits<float>::quiet_NaN();
  const float m_new = std::isnan(chunk_max) || chunk_max > m ? chunk_max : m;
  if (m_new == kNegInf) {  // every score -inf: no weight, nothing to rescale
    std::fill(p, p + n, uint16_t{0});
    return 1.0f;
  }
  float sum;
  if (hn::AllFalse(df, nan_lanes) && hn::GetLane(hn::MinOfLanes(df, min_lanes)) > kNegInf) {
    // Every score finite (the common case): no lane needs the NaN rule below.
#if HWY_TARGET == HWY_AVX3_DL
    if (cpu_has_bf16_dot()) {
      sum = finite_weights_native(scale, m_new, s, n, p);
    } else
#endif
    {
      sum = finite_weights(df, scale, m_new, s, n, p);
    }
  } else {
    const hn::Rebind<uint16_t, DF> du16;
    auto sum_lanes = hn::Zero(df);
    for (int k = 0; k < n; k += lanes) {
      const auto w =
          exp_keeping_nan(df, hn::MulSub(hn::LoadU(df, s + k), vscale, hn::Set(df, m_new)));
      hn::StoreU(hn::DemoteTo(du16, bf16_bits(df, w)), du16, p + k);
      sum_lanes = hn::Add(sum_lanes, w);
    }
    sum = hn::GetLane(hn::SumOfLanes(df, sum_lanes));
  }
  const float correction = m == m_new ? 1.0f : (m == kNegInf ? 0.0f : std::exp(m - m_new));
  l = l * correction + sum;
  m = m_new;
  return correction;
}

// Keys [first, first + n) against every query vector of KV heads [h0, h0 + heads) (per_kv_head
// each, from s.q16), all of which see them: gathered into contiguous bf16 rows, scored and summed
// by oneDNN, the online softmax between the two products in float.
template <class DF>
HWY_INLINE void attend_chunk(DF df, const AttentionPass& pass, const RequestPass& rp, Scratch& s,
                             int h0, int heads, int per_kv_head, int first, int n) {
  const KvSource& kv = pass.kv;
  const int dim = pass.head_size;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(uint16_t);
  for (int h = 0; h < heads; ++h) {
    for (int j = 0; j < n; ++j) {
      const int64_t row = key_offset(kv, rp, first + j) + (h0 + h) * kv.head_stride;
      std::memcpy(&s.k16[static_cast<size_t>(j) * dim],
                  static_cast<const uint16_t*>(kv.k_base) + row, row_bytes);
      std::memcpy(&s.v16[static_cast<size_t>(j) * dim],
                  static_cast<const uint16_t*>(kv.v_base) + row, row_bytes);
    }
    const int64_t q0 = static_cast<int64_t>(h) * per_kv_head;
    matmul_abt(&s.q16[q0 * dim], s.k16.data(), per_kv_head, n, dim, s.scores.data());
    for (int i = 0; i < per_kv_head; ++i) {
      s.correction[i] = softmax_chunk(df, pass.scale, &s.scores[static_cast<size_t>(i) * n], n,
                                      &s.p16[static_cast<size_t>(i) * n], s.m[q0 + i], s.l[q0 + i]);
    }
    matmul_ab(s.p16.data(), s.v16.data(), per_kv_head, n, dim, s.product.data());
    for (int i = 0; i < per_kv_head; ++i) {
      float* acc = &s.acc[(q0 + i) * dim];
      const float* product = &s.product[static_cast<size_t>(i) * dim];
      const auto c = hn::Set(df, s.correction[i]);
      for (int d = 0; d < dim; d += lanes) {
        hn::StoreU(hn::MulAdd(hn::LoadU(df, acc + d), c, hn::LoadU(df, product + d)), df, acc + d);
      }
    }
  }
}
#endif

// What one block of query vectors needs to know about the task.
struct BlockContext {
  const AttentionPass& pass;
  const RequestPass& rp;
  Scratch& s;
  const float* keys;           // the KV head's widened tile of keys [kKeyTile][dim]
  const float* values;         // and of values
  TilePrefetcher& prefetcher;  // the next tile's rows
  int first;                   // the tile's first key, pass-local
  int count;                   // keys in the tile
  int rows;                    // query rows of the task
  int group;                   // query heads per KV head
  int first_head;              // query head of the task's first KV head's first query vector
  int row_begin;               // the task's first row within the request
};

// The kQ query vectors from index qi (all of one KV head) against the current tile.
template <int kQ, class DF>
HWY_INLINE void attend_block(DF df, const BlockContext& c, int qi) {
  Scratch& s = c.s;
  const int dim = c.pass.head_size;
  int lo[kQ], hi[kQ];
  int block_lo = c.count, block_hi = 0;
  for (int i = 0; i < kQ; ++i) {
    lo[i] = std::max(s.lo[qi + i] - c.first, 0);
    hi[i] = std::min(s.hi[qi + i] - c.first, c.count);
    if (lo[i] < hi[i]) block_lo = std::min(block_lo, lo[i]), block_hi = std::max(block_hi, hi[i]);
  }
  if (block_lo >= block_hi) return;
  const int k0 = block_lo / kKeys * kKeys;
  const int k1 = (block_hi + kKeys - 1) / kKeys * kKeys;
  float* w = s.p.data();
  score_keys<kQ>(df, s.q.data() + static_cast<int64_t>(qi) * dim, c.keys, dim, k0, k1, w,
                 c.prefetcher);
  float correction[kQ];
  for (int i = 0; i < kQ; ++i) {
    // Vectors are ordered (KV head, row, head of the group) within the task.
    const int local = qi + i;
    const int row = (local / c.group) % c.rows;
    const int head = c.first_head + (local / (c.group * c.rows)) * c.group + local % c.group;
    const int64_t pos = static_cast<int64_t>(c.rp.query_pos0) + c.row_begin + row;
    const int64_t key0 = static_cast<int64_t>(c.rp.key_pos0) + c.first;
    float* w_i = w + i * kKeyTile;
    const int lo_i = std::min(lo[i], hi[i]);
    const float scale = apply_score_mods(c.pass, head, pos, key0, lo_i, hi[i], w_i);
    correction[i] = softmax_tile<kKeyTile>(df, scale, lo_i, hi[i], w_i, s.m[local], s.l[local]);
  }
  // Values: keys every vector of the block sees together; the rest (the diagonal of a causal
  // prefill) one vector at a time, so that no value a row does not see is ever multiplied in.
  float* acc = s.acc.data() + static_cast<int64_t>(qi) * dim;
  const float* values = c.values;
  int common_lo = 0, common_hi = c.count;
  for (int i = 0; i < kQ; ++i) {
    common_lo = std::max(common_lo, lo[i]);
    common_hi = std::min(common_hi, hi[i]);
  }
  if (common_lo < common_hi) {
    accumulate_values<kQ>(df, w, correction, values, dim, common_lo, common_hi, acc, c.prefetcher);
  }
  for (int i = 0; i < kQ; ++i) {
    const float one = 1.0f;
    float* acc_i = acc + static_cast<int64_t>(i) * dim;
    const float* w_i = w + i * kKeyTile;
    if (common_lo < common_hi) {
      accumulate_values<1>(df, w_i, &one, values, dim, lo[i], common_lo, acc_i, c.prefetcher);
      accumulate_values<1>(df, w_i, &one, values, dim, common_hi, hi[i], acc_i, c.prefetcher);
    } else if (lo[i] < hi[i]) {
      accumulate_values<1>(df, w_i, &correction[i], values, dim, lo[i], hi[i], acc_i, c.prefetcher);
    }
  }
}

template <class DF>
void run_task_on(DF df, const AttentionPass& pass, const Task& task, Scratch& s) {
  const RequestPass& rp = pass.requests[task.request];
  const int dim = pass.head_size;
  const int group = pass.num_heads / pass.num_kv_heads;
  const int rows = task.row_end - task.row_begin;
  const int kv_heads = task.kv_head_end - task.kv_head_begin;
  const int per_kv_head = rows * group;  // query vectors of one KV head
  const int nq = kv_heads * per_kv_head;
  const int first_head = task.kv_head_begin * group;
  s.reserve(nq, kv_heads, dim);

  // Query vectors, their visible key ranges (pass-local key indices) and softmax state.
  const ShardedMaskRule rule{{pass.causal, pass.window.left, pass.window.right}, pass.key_shard};
  int task_lo = rp.kv_len;
  int task_hi = 0;
  int all_lo = 0, all_hi = rp.kv_len;  // keys every row of the task sees
  for (int r = 0; r < rows; ++r) {
    const int64_t token = rp.q_start + task.row_begin + r;
    const int64_t pos = static_cast<int64_t>(rp.query_pos0) + task.row_begin + r;
    // The pass holds keys [key_pos0, key_pos0 + kv_len) of the sequence.
    const KeyRange<int64_t> visible =
        visible_keys<int64_t>(rule, int64_t{rp.key_pos0} + rp.kv_len, pos);
    const int64_t lo = std::max<int64_t>(visible.lo - rp.key_pos0, 0);
    const int64_t hi = std::max(lo, visible.hi + 1 - rp.key_pos0);
    for (int h = 0; h < kv_heads; ++h) {
      for (int g = 0; g < group; ++g) {
        const int i = (h * rows + r) * group + g;
        const int head = first_head + h * group + g;
        with_dtype(pass.query_dtype, [&](auto type) {
          widen_scaled<decltype(type)::value>(
              df, pass.query, token * pass.q_token_stride + head * pass.q_head_stride, dim, 1.0f,
              s.q.data() + static_cast<int64_t>(i) * dim);
        });
        s.lo[i] = static_cast<int>(lo);
        s.hi[i] = static_cast<int>(hi);
        const bool sink = pass.sinks != nullptr;
        s.m[i] = sink ? pass.sinks[head] : kNegInf;  // the sink joins the denominator only
        s.l[i] = sink ? 1.0f : 0.0f;
      }
    }
    if (lo < hi) {
      task_lo = std::min(task_lo, static_cast<int>(lo));
      task_hi = std::max(task_hi, static_cast<int>(hi));
    }
    all_lo = std::max(all_lo, static_cast<int>(lo));
    all_hi = std::min(all_hi, static_cast<int>(hi));
  }
  std::fill(s.acc.begin(), s.acc.begin() + static_cast<int64_t>(nq) * dim, 0.0f);
  const bool chunks = use_onednn_chunks(pass, per_kv_head) && all_hi - all_lo >= kMinChunkKeys;
  if constexpr (kChunksOnOnednn) {
    if (chunks) {
      s.reserve_chunks(nq, dim);
      round_to_bf16(df, s.q.data(), nq * dim, s.q16.data());  // exact: the queries are bf16
    }
  }

  // Issue points per tile: per group of keys scored and per block of value columns, for every
  // block of query vectors.
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int column_calls =
      dim / (kColumnVectors * lanes) + (dim % (kColumnVectors * lanes)) / lanes;
  const int blocks = kv_heads * ((per_kv_head + kQueries - 1) / kQueries);
  const int calls = blocks * (kKeyTile / kKeys + column_calls);
  TilePrefetcher prefetcher;
  for (int first = task_lo; first < task_hi; first += kKeyTile) {
    if constexpr (kChunksOnOnednn) {
      const int n = std::min(kChunk, all_hi - first) / kKeyTile * kKeyTile;
      if (chunks && first >= all_lo && n >= kMinChunkKeys) {
        attend_chunk(df, pass, rp, s, task.kv_head_begin, kv_heads, per_kv_head, first, n);
        first += n - kKeyTile;
        continue;
      }
    }
    const int count = std::min(kKeyTile, task_hi - first);
    prefetcher.plan(pass, rp, task.kv_head_begin, kv_heads, first + kKeyTile,
                    std::min(kKeyTile, task_hi - first - count), calls);
    widen_tile(df, pass, rp, pass.kv.k_base, pass.kv.k_scale, pass.kv.k_scale_stride,
               task.kv_head_begin, kv_heads, first, count, s.k_tile.data());
    widen_tile(df, pass, rp, pass.kv.v_base, pass.kv.v_scale, pass.kv.v_scale_stride,
               task.kv_head_begin, kv_heads, first, count, s.v_tile.data());
    for (int h = 0; h < kv_heads; ++h) {
      const int64_t head_tile = static_cast<int64_t>(h) * kKeyTile * dim;
      const BlockContext context{pass,
                                 rp,
                                 s,
                                 s.k_tile.data() + head_tile,
                                 s.v_tile.data() + head_tile,
                                 prefetcher,
                                 first,
                                 count,
                                 rows,
                                 group,
                                 first_head,
                                 task.row_begin};
      const int begin = h * per_kv_head, end = begin + per_kv_head;
      int qi = begin;
      for (; qi + kQueries <= end; qi += kQueries) attend_block<kQueries>(df, context, qi);
      for (; qi < end; ++qi) attend_block<1>(df, context, qi);
    }
  }

  // Normalise and store; a row with no visible key and no sink gets 0 and -inf.
  for (int i = 0; i < nq; ++i) {
    const int row = (i / group) % rows;
    const int head = first_head + (i / per_kv_head) * group + i % group;
    const int64_t token = rp.q_start + task.row_begin + row;
    const bool empty = s.l[i] == 0.0f;
    StoreOutputRow(s.acc.data() + static_cast<int64_t>(i) * dim, dim, empty ? 0.0f : 1.0f / s.l[i],
                   pass.output_dtype, pass.output,
                   token * pass.o_token_stride + head * pass.o_head_stride);
    if (pass.lse != nullptr) {
      pass.lse[head * pass.lse_head_stride + token * pass.lse_token_stride] =
          empty ? kNegInf : s.m[i] + std::log(s.l[i]);
    }
  }
}

// The exported task (decode tasks excepted: decode_task-inl.h): on whole vectors where head_size
// allows, else 8 lanes (head_size is a multiple of 8).
void RunAttentionTask(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  const hn::ScalableTag<float> full;
  if (pass.head_size % static_cast<int>(hn::Lanes(full)) == 0) {
    return run_task_on(full, pass, task, scratch);
  }
  return run_task_on(hn::CappedTag<float, 8>(), pass, task, scratch);
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
