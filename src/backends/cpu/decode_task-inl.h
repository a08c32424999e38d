// The decode kernel on float multiply-adds (decode_bf16_dot-inl.h has the one on bf16 dot
// products, which run_decode below prefers where it applies): a task of one query row, whose query
// vectors all see the same keys, over KV heads of one request. Keys and values are read from the
// cache straight into registers (bf16 as even/odd pairs, FP8 and f16 through f16), never widened
// into a tile in memory; the scores of a few query vectors of a GQA group against a few keys at a
// time stay in registers, and an online softmax runs per tile of kDecodeTile keys. The queries and
// the accumulated outputs are kept in the lane order widen_pair produces (pair_position), so that
// no element is shuffled per key.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_DECODE_TASK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_DECODE_TASK_INL_H_
#undef PAGEDATTN_CPU_DECODE_TASK_INL_H_
#else
#define PAGEDATTN_CPU_DECODE_TASK_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/attention_kernel_internal.h"
#include "backends/cpu/decode_bf16_dot-inl.h"
#include "backends/cpu/decode_rows-inl.h"
#include "backends/cpu/kv_rows-inl.h"
#include "backends/cpu/kv_widen-inl.h"
#include "backends/cpu/tile_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Query vectors of a group scored together: their kDecodeQueries x kDecodeKeys partial sums and
// the keys' widened vectors fill AVX-512's 32 registers; 16-register targets take two.
constexpr int kDecodeQueries =
    (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3) ? 2 : 4;
static_assert(kDecodeQueries <= kQueryBlock);
constexpr int kValuePairs = 2;  // pairs of value vectors accumulated together

// The dot products of kQ query vectors at q (row stride dim, pair order) with kK keys whose rows
// start at element rows[j] + offset of `keys`, stored to s[i * kDecodeTile + j].
template <DType kType, int kQ, int kK, class DF>
HWY_INLINE void score_rows(DF df, const float* HWY_RESTRICT q, const void* keys,
                           const int64_t* HWY_RESTRICT rows, int64_t offset, int dim,
                           float* HWY_RESTRICT s) {
  using V = hn::Vec<DF>;
  const int lanes = static_cast<int>(hn::Lanes(df));
  V acc[kQ][kK];
  for (int i = 0; i < kQ; ++i) {
    for (int j = 0; j < kK; ++j) acc[i][j] = hn::Zero(df);
  }
  for (int d = 0; d < dim; d += 2 * lanes) {
    V k0[kK], k1[kK];
    for (int j = 0; j < kK; ++j) widen_pair<kType>(df, keys, rows[j] + offset + d, k0[j], k1[j]);
    for (int i = 0; i < kQ; ++i) {
      const V q0 = hn::LoadU(df, q + i * dim + d);
      const V q1 = hn::LoadU(df, q + i * dim + d + lanes);
      for (int j = 0; j < kK; ++j)
        acc[i][j] = hn::MulAdd(q1, k1[j], hn::MulAdd(q0, k0[j], acc[i][j]));
    }
  }
  for (int i = 0; i < kQ; ++i) {
    if constexpr (kK == 4) {
      store_lane_sums(df, acc[i][0], acc[i][1], acc[i][2], acc[i][3], s + i * kDecodeTile);
    } else {
      for (int j = 0; j < kK; ++j)
        s[i * kDecodeTile + j] = hn::GetLane(hn::SumOfLanes(df, acc[i][j]));
    }
  }
}

// acc_i = acc_i * correction_i + sum over the tile's `count` keys of w_i[k] * value k, for kQ query
// vectors, kP pairs of vectors from element d on (pair order).
template <DType kType, int kQ, int kP, class DF>
HWY_INLINE void accumulate_rows(DF df, const float* HWY_RESTRICT w,
                                const float* HWY_RESTRICT correction, const void* values,
                                const int64_t* HWY_RESTRICT rows, int64_t offset, int count,
                                int dim, int d, float* HWY_RESTRICT acc,
                                TilePrefetcher& prefetcher) {
  using V = hn::Vec<DF>;
  const int lanes = static_cast<int>(hn::Lanes(df));
  V a[kQ][2 * kP];
  for (int i = 0; i < kQ; ++i) {
    const V c = hn::Set(df, correction[i]);
    for (int j = 0; j < 2 * kP; ++j) {
      a[i][j] = hn::Mul(hn::LoadU(df, acc + i * dim + d + j * lanes), c);
    }
  }
  for (int k = 0; k < count; ++k) {
    prefetcher.issue();
    V v[2 * kP];
    for (int p = 0; p < kP; ++p) {
      widen_pair<kType>(df, values, rows[k] + offset + d + 2 * p * lanes, v[2 * p], v[2 * p + 1]);
    }
    for (int i = 0; i < kQ; ++i) {
      const V wi = hn::Set(df, w[i * kDecodeTile + k]);
      for (int j = 0; j < 2 * kP; ++j) a[i][j] = hn::MulAdd(wi, v[j], a[i][j]);
    }
  }
  for (int i = 0; i < kQ; ++i) {
    for (int j = 0; j < 2 * kP; ++j) hn::StoreU(a[i][j], df, acc + i * dim + d + j * lanes);
  }
}

// What the query blocks of one tile share.
struct DecodeTile {
  const AttentionPass& pass;
  Scratch& s;
  const int64_t* rows;         // element offset of each key's row, KV head 0
  int count;                   // keys in the tile
  TilePrefetcher& prefetcher;  // the next tile's rows
};

// Query vectors [qi, qi + kQ) of KV head kv_head against one tile: scores, online softmax with
// the scores times score_scale, values.
template <DType kType, int kQ, class DF>
HWY_INLINE void decode_block(DF df, const DecodeTile& t, int kv_head, float score_scale, int qi) {
  const KvSource& kv = t.pass.kv;
  const int dim = t.pass.head_size;
  const int64_t offset = kv_head * kv.head_stride;
  const float* q = t.s.q.data() + static_cast<int64_t>(qi) * dim;
  float* w = t.s.p.data();
  int k = 0;
  for (; k + kDecodeKeys <= t.count; k += kDecodeKeys) {
    t.prefetcher.issue();
    score_rows<kType, kQ, kDecodeKeys>(df, q, kv.k_base, t.rows + k, offset, dim, w + k);
  }
  for (; k < t.count; ++k)
    score_rows<kType, kQ, 1>(df, q, kv.k_base, t.rows + k, offset, dim, w + k);
  float correction[kQ];
  for (int i = 0; i < kQ; ++i) {
    correction[i] = softmax_tile<kDecodeTile>(df, score_scale, 0, t.count, w + i * kDecodeTile,
                                              t.s.m[qi + i], t.s.l[qi + i]);
  }
  const int pair = 2 * static_cast<int>(hn::Lanes(df));
  float* acc = t.s.acc.data() + static_cast<int64_t>(qi) * dim;
  int d = 0;
  for (; d + kValuePairs * pair <= dim; d += kValuePairs * pair) {
    accumulate_rows<kType, kQ, kValuePairs>(df, w, correction, kv.v_base, t.rows, offset, t.count,
                                            dim, d, acc, t.prefetcher);
  }
  for (; d < dim; d += pair) {
    accumulate_rows<kType, kQ, 1>(df, w, correction, kv.v_base, t.rows, offset, t.count, dim, d,
                                  acc, t.prefetcher);
  }
}

// The multiplier that turns widened codes of KV head h of one plane into values.
inline float plane_multiplier(const KvSource& kv, const float* scales, int64_t stride, int h) {
  return widen_multiplier(kv.dtype, scales == nullptr ? 1.0f : scales[h * stride]);
}

// The decode task for KV cache dtype kType; head_size is a multiple of 2 * Lanes(df).
template <DType kType, class DF>
void run_decode_task(DF df, const AttentionPass& pass, const Task& task, Scratch& s) {
  const KvSource& kv = pass.kv;
  const RequestPass& rp = pass.requests[task.request];
  const int dim = pass.head_size;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const DecodeRow r = decode_row(pass, task);
  const int kv_heads = task.kv_head_end - task.kv_head_begin;
  s.reserve(r.nq, kv_heads, dim);
  if (s.row.size() < static_cast<size_t>(dim)) s.row.resize(dim);

  // Queries in pair order.
  for (int i = 0; i < r.nq; ++i) {
    with_dtype(pass.query_dtype, [&](auto type) {
      widen_scaled<decltype(type)::value>(
          df, pass.query, r.token * pass.q_token_stride + (r.first_head + i) * pass.q_head_stride,
          dim, 1.0f, s.row.data());
    });
    float* q = s.q.data() + static_cast<int64_t>(i) * dim;
    for (int j = 0; j < dim; ++j) q[pair_position<kType>(lanes, j)] = s.row[j];
  }
  start_decode_rows(pass, r, s);

  // Prefetch issue points per tile: per group of keys scored and per key of each pass over value
  // columns, for every block of query vectors.
  const int group = r.group;
  const int pair = 2 * lanes;
  const int column_calls = dim / (kValuePairs * pair) + (dim % (kValuePairs * pair)) / pair;
  const int blocks = kv_heads * ((group + kDecodeQueries - 1) / kDecodeQueries);
  const int calls = blocks * (kDecodeTile / kDecodeKeys + column_calls * kDecodeTile);
  TilePrefetcher prefetcher;
  int64_t rows[kDecodeTile];
  for (int first = r.lo; first < r.hi; first += kDecodeTile) {
    const int count = std::min(kDecodeTile, r.hi - first);
    const int ahead = first + kPrefetchTiles * kDecodeTile;
    prefetcher.plan(pass, rp, task.kv_head_begin, kv_heads, ahead,
                    std::clamp(r.hi - ahead, 0, kDecodeTile), calls);
    for (int k = 0; k < count; ++k) rows[k] = key_offset(kv, rp, first + k);
    const DecodeTile tile{pass, s, rows, count, prefetcher};
    for (int h = 0; h < kv_heads; ++h) {
      const int kv_head = task.kv_head_begin + h;
      const float score_scale =
          pass.scale * plane_multiplier(kv, kv.k_scale, kv.k_scale_stride, kv_head);
      const int begin = h * group, end = begin + group;
      int qi = begin;
      for (; qi + kDecodeQueries <= end; qi += kDecodeQueries) {
        decode_block<kType, kDecodeQueries>(df, tile, kv_head, score_scale, qi);
      }
      for (; qi < end; ++qi) decode_block<kType, 1>(df, tile, kv_head, score_scale, qi);
    }
  }

  // Back to element order, the values' multiplier folded in.
  finish_decode_rows(
      pass, task, r, s, [&](int j) { return pair_position<kType>(lanes, j); },
      [&](int kv_head) { return plane_multiplier(kv, kv.v_scale, kv.v_scale_stride, kv_head); });
}

// The decode task for a cache of kType: on bf16 dot products where the CPU and the pass allow,
// else on float multiply-adds over the widest vectors whose pairs divide head_size (a multiple
// of 8). cpu_simd_decode.cc and cpu_simd_decode_fp8.cc export it per dtype.
template <DType kType>
void run_decode_of(const AttentionPass& pass, const Task& task, Scratch& s) {
#if HWY_TARGET == HWY_AVX3_DL
  if constexpr (kType != DType::kF32 && kType != DType::kF16) {
    if (bf16_dot_decode_applies(pass)) return run_bf16_dot_decode_task<kType>(pass, task, s);
  }
#endif
  const hn::ScalableTag<float> full;
  if (pass.head_size % (2 * static_cast<int>(hn::Lanes(full))) == 0) {
    return run_decode_task<kType>(full, pass, task, s);
  }
  if constexpr (hn::MaxLanes(full) > 8) {
    if (pass.head_size % 16 == 0) {
      return run_decode_task<kType>(hn::CappedTag<float, 8>(), pass, task, s);
    }
  }
  return run_decode_task<kType>(hn::CappedTag<float, 4>(), pass, task, s);
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
