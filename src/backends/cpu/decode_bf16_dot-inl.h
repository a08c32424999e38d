// The decode kernel on bf16 dot products (AVX3_DL with AVX512_BF16, bf16 queries, bf16 or FP8
// caches): Q.K as bf16 pairs along the head dimension, P.V as pairs of keys (two value rows
// interleaved, the weights rounded to bf16 as the GPU kernels do), accumulated in float. Keys and
// values go from the cache into registers without a float copy; FP8 through exact tables. The
// queries are stored in the order the keys' bf16 lanes come in (key_position), the outputs in the
// order the value pairs come in (value_position), so that nothing is shuffled per key beyond the
// pairing itself. The tiles, online softmax and prefetching are the float kernel's
// (decode_task-inl.h).

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_DECODE_BF16_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_DECODE_BF16_DOT_INL_H_
#undef PAGEDATTN_CPU_DECODE_BF16_DOT_INL_H_
#else
#define PAGEDATTN_CPU_DECODE_BF16_DOT_INL_H_
#endif

#include <hwy/highway.h>

#include "backends/cpu/bf16_dot_ops-inl.h"

#if HWY_TARGET == HWY_AVX3_DL
#include <algorithm>
#include <cstdint>

#include "backends/cpu/attention_kernel_internal.h"
#include "backends/cpu/decode_rows-inl.h"
#include "backends/cpu/kv_rows-inl.h"
#include "backends/cpu/tile_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements of a cache row one step of the kernel reads: one vector of bf16, one of FP8 codes.
template <DType kType>
constexpr int kDotChunk = kType == DType::kBF16 ? 32 : 64;

// Whether the pass's decode tasks run on this kernel.
inline bool bf16_dot_decode_applies(const AttentionPass& pass) {
  const DType kv = pass.kv.dtype;
  const bool fp8 = kv == DType::kFP8E4M3 || kv == DType::kFP8E5M2;
  return pass.query_dtype == DType::kBF16 && (kv == DType::kBF16 || fp8) &&
         pass.head_size % (fp8 ? kDotChunk<DType::kFP8E4M3> : kDotChunk<DType::kBF16>) == 0 &&
         cpu_has_bf16_dot();
}

// Where query element j goes: bf16 keys come in order; 64 FP8 codes as two vectors holding, per
// 128-bit block b, codes 16b..16b+7 and 16b+8..16b+15 (fp8_to_bf16).
template <DType kType>
inline int key_position(int j) {
  if constexpr (kType == DType::kBF16) {
    return j;
  } else {
    const int r = j % 64;
    return j - r + 32 * ((r % 16) / 8) + 8 * (r / 16) + r % 8;
  }
}

// Where output element j accumulates: a chunk of C elements, 128-bit blocks of B = C / 4, comes
// as C / 16 vectors of pairs, vector m holding elements 4m..4m+3 of every block.
template <DType kType>
inline int value_position(int j) {
  constexpr int kChunk = kDotChunk<kType>, kBlock = kChunk / 4;
  const int r = j % kChunk;
  return j - r + 16 * ((r % kBlock) / 4) + 4 * (r / kBlock) + r % 4;
}

// The dequantisation scale of KV head h of one plane (1 without scales).
inline float plane_scale(const float* scales, int64_t stride, int h) {
  return scales == nullptr ? 1.0f : scales[h * stride];
}

// The dot products of kQ bf16 query vectors at q (row stride dim, key_position order) with kK
// keys whose rows start at element rows[j] + offset of `keys`, stored to s[i * kDecodeTile + j].
template <DType kType, int kQ, int kK>
PAGEDATTN_BF16_DOT HWY_INLINE void score_rows_dot(const uint16_t* HWY_RESTRICT q, const void* keys,
                                                  const int64_t* HWY_RESTRICT rows, int64_t offset,
                                                  int dim, const Fp8Tables& t,
                                                  float* HWY_RESTRICT s) {
  __m512 acc[kQ][kK];
  for (int i = 0; i < kQ; ++i) {
    for (int j = 0; j < kK; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int d = 0; d < dim; d += kDotChunk<kType>) {
    if constexpr (kType == DType::kBF16) {
      const uint16_t* k = static_cast<const uint16_t*>(keys) + offset + d;
      __m512i kv[kK];
      for (int j = 0; j < kK; ++j) kv[j] = _mm512_loadu_si512(k + rows[j]);
      for (int i = 0; i < kQ; ++i) {
        const __m512i qv = _mm512_loadu_si512(q + i * dim + d);
        for (int j = 0; j < kK; ++j) acc[i][j] = dot_pairs(acc[i][j], qv, kv[j]);
      }
    } else {
      const uint8_t* k = static_cast<const uint8_t*>(keys) + offset + d;
      __m512i k0[kK], k1[kK];
      for (int j = 0; j < kK; ++j) fp8_to_bf16(t, _mm512_loadu_si512(k + rows[j]), k0[j], k1[j]);
      for (int i = 0; i < kQ; ++i) {
        const __m512i q0 = _mm512_loadu_si512(q + i * dim + d);
        const __m512i q1 = _mm512_loadu_si512(q + i * dim + d + 32);
        for (int j = 0; j < kK; ++j) {
          acc[i][j] = dot_pairs(dot_pairs(acc[i][j], q0, k0[j]), q1, k1[j]);
        }
      }
    }
  }
  const hn::ScalableTag<float> df;
  for (int i = 0; i < kQ; ++i) {
    if constexpr (kK == 4) {
      using V = hn::Vec<decltype(df)>;
      store_lane_sums(df, V{acc[i][0]}, V{acc[i][1]}, V{acc[i][2]}, V{acc[i][3]},
                      s + i * kDecodeTile);
    } else {
      for (int j = 0; j < kK; ++j) s[i * kDecodeTile + j] = _mm512_reduce_add_ps(acc[i][j]);
    }
  }
}

// acc_i = acc_i * correction_i + sum over the tile's `count` keys of weight_i[k] * value k, for
// kQ query vectors and kVecs * 16 elements from element d on (value_position order). Keys go in
// pairs, weights as bf16 pairs (w: kDecodeTile / 2 per query vector); an odd last key is paired
// with itself at weight 0, so that no key beyond the tile is read.
template <DType kType, int kQ, int kVecs>
PAGEDATTN_BF16_DOT HWY_INLINE void accumulate_rows_dot(
    const uint32_t* HWY_RESTRICT w, const float* HWY_RESTRICT correction, const void* values,
    const int64_t* HWY_RESTRICT rows, int64_t offset, int count, int dim, int d,
    float* HWY_RESTRICT acc, const Fp8Tables& t, TilePrefetcher& prefetcher) {
  static_assert(kType == DType::kBF16 ? (kVecs == 2 || kVecs == 4) : kVecs == 4);
  __m512 a[kQ][kVecs];
  for (int i = 0; i < kQ; ++i) {
    const __m512 c = _mm512_set1_ps(correction[i]);
    for (int n = 0; n < kVecs; ++n) {
      a[i][n] = _mm512_mul_ps(_mm512_loadu_ps(acc + i * dim + d + 16 * n), c);
    }
  }
  for (int k = 0; k < count; k += 2) {
    prefetcher.issue();
    const int64_t r0 = rows[k] + offset + d;
    const int64_t r1 = (k + 1 < count ? rows[k + 1] : rows[k]) + offset + d;
    __m512i v[kVecs];
    if constexpr (kType == DType::kBF16) {
      const uint16_t* vals = static_cast<const uint16_t*>(values);
      for (int h = 0; h < kVecs / 2; ++h) {
        const __m512i x0 = _mm512_loadu_si512(vals + r0 + 32 * h);
        const __m512i x1 = _mm512_loadu_si512(vals + r1 + 32 * h);
        v[2 * h] = _mm512_unpacklo_epi16(x0, x1);
        v[2 * h + 1] = _mm512_unpackhi_epi16(x0, x1);
      }
    } else {
      const uint8_t* vals = static_cast<const uint8_t*>(values);
      const __m512i x0 = _mm512_loadu_si512(vals + r0), x1 = _mm512_loadu_si512(vals + r1);
      fp8_to_bf16(t, _mm512_unpacklo_epi8(x0, x1), v[0], v[1]);
      fp8_to_bf16(t, _mm512_unpackhi_epi8(x0, x1), v[2], v[3]);
    }
    for (int i = 0; i < kQ; ++i) {
      const __m512i wi = _mm512_set1_epi32(static_cast<int>(w[i * (kDecodeTile / 2) + k / 2]));
      for (int n = 0; n < kVecs; ++n) a[i][n] = dot_pairs(a[i][n], wi, v[n]);
    }
  }
  for (int i = 0; i < kQ; ++i) {
    for (int n = 0; n < kVecs; ++n) _mm512_storeu_ps(acc + i * dim + d + 16 * n, a[i][n]);
  }
}

// What the query blocks of one tile share.
struct DotTile {
  const AttentionPass& pass;
  Scratch& s;
  const int64_t* rows;  // element offset of each key's row, KV head 0
  int count;            // keys in the tile
  const Fp8Tables& tables;
  TilePrefetcher& prefetcher;  // the next tile's rows
};

// Query vectors [qi, qi + kQ) of KV head kv_head against one tile: scores, online softmax with
// the scores times score_scale, weights to bf16, values.
template <DType kType, int kQ>
PAGEDATTN_BF16_DOT HWY_INLINE void dot_block(const DotTile& t, int kv_head, float score_scale,
                                             int qi) {
  const KvSource& kv = t.pass.kv;
  const int dim = t.pass.head_size;
  const int64_t offset = kv_head * kv.head_stride;
  const uint16_t* q = t.s.q16.data() + static_cast<int64_t>(qi) * dim;
  float* w = t.s.p.data();
  int k = 0;
  for (; k + kDecodeKeys <= t.count; k += kDecodeKeys) {
    t.prefetcher.issue();
    score_rows_dot<kType, kQ, kDecodeKeys>(q, kv.k_base, t.rows + k, offset, dim, t.tables, w + k);
  }
  for (; k < t.count; ++k) {
    score_rows_dot<kType, kQ, 1>(q, kv.k_base, t.rows + k, offset, dim, t.tables, w + k);
  }
  const hn::ScalableTag<float> df;
  float correction[kQ];
  uint16_t* w16 = t.s.w16.data();
  for (int i = 0; i < kQ; ++i) {
    float* wi = w + i * kDecodeTile;
    correction[i] =
        softmax_tile<kDecodeTile>(df, score_scale, 0, t.count, wi, t.s.m[qi + i], t.s.l[qi + i]);
    for (int j = 0; j < kDecodeTile; j += 32) {
      _mm512_storeu_si512(w16 + i * kDecodeTile + j,
                          to_bf16(_mm512_loadu_ps(wi + j), _mm512_loadu_ps(wi + j + 16)));
    }
  }
  const uint32_t* pairs = reinterpret_cast<const uint32_t*>(w16);
  float* acc = t.s.acc.data() + static_cast<int64_t>(qi) * dim;
  int d = 0;
  for (; d + 64 <= dim; d += 64) {
    accumulate_rows_dot<kType, kQ, 4>(pairs, correction, kv.v_base, t.rows, offset, t.count, dim, d,
                                      acc, t.tables, t.prefetcher);
  }
  if constexpr (kType == DType::kBF16) {
    if (d < dim) {
      accumulate_rows_dot<kType, kQ, 2>(pairs, correction, kv.v_base, t.rows, offset, t.count, dim,
                                        d, acc, t.tables, t.prefetcher);
    }
  }
}

// The decode task on bf16 dot products for cache dtype kType (bf16_dot_decode_applies).
template <DType kType>
PAGEDATTN_BF16_DOT void run_bf16_dot_decode_task(const AttentionPass& pass, const Task& task,
                                                 Scratch& s) {
  const KvSource& kv = pass.kv;
  const RequestPass& rp = pass.requests[task.request];
  const int dim = pass.head_size;
  const DecodeRow r = decode_row(pass, task);
  const int kv_heads = task.kv_head_end - task.kv_head_begin;
  s.reserve(r.nq, kv_heads, dim);
  const size_t q_elems = static_cast<size_t>(r.nq) * dim;
  if (s.q16.size() < q_elems) s.q16.resize(q_elems);
  if (s.w16.size() < static_cast<size_t>(kQueryBlock) * kDecodeTile) {
    s.w16.resize(kQueryBlock * kDecodeTile);
  }
  if (s.row.size() < static_cast<size_t>(dim)) s.row.resize(dim);

  // Queries as they are (bf16), in key_position order.
  for (int i = 0; i < r.nq; ++i) {
    const uint16_t* src = static_cast<const uint16_t*>(pass.query) + r.token * pass.q_token_stride +
                          (r.first_head + i) * pass.q_head_stride;
    uint16_t* q = s.q16.data() + static_cast<int64_t>(i) * dim;
    for (int j = 0; j < dim; ++j) q[key_position<kType>(j)] = src[j];
  }
  start_decode_rows(pass, r, s);

  // Prefetch issue points per tile: per group of keys scored and per pair of keys of each pass
  // over value columns, for every block of query vectors.
  const int group = r.group;
  const int column_calls = dim / 64 + (dim % 64 != 0 ? 1 : 0);
  const int blocks_per_head = group / 4 + (group % 4) / 2 + group % 2;
  const int calls =
      kv_heads * blocks_per_head * (kDecodeTile / kDecodeKeys + column_calls * kDecodeTile / 2);
  // e4m3's tables for a bf16 cache too, unused there.
  constexpr DType kTableType = kType == DType::kFP8E5M2 ? kType : DType::kFP8E4M3;
  const Fp8Tables tables = fp8_tables<kTableType>();
  TilePrefetcher prefetcher;
  int64_t rows[kDecodeTile];
  for (int first = r.lo; first < r.hi; first += kDecodeTile) {
    const int count = std::min(kDecodeTile, r.hi - first);
    const int ahead = first + kPrefetchTiles * kDecodeTile;
    prefetcher.plan(pass, rp, task.kv_head_begin, kv_heads, ahead,
                    std::clamp(r.hi - ahead, 0, kDecodeTile), calls);
    for (int k = 0; k < count; ++k) rows[k] = key_offset(kv, rp, first + k);
    const DotTile tile{pass, s, rows, count, tables, prefetcher};
    for (int h = 0; h < kv_heads; ++h) {
      const int kv_head = task.kv_head_begin + h;
      const float score_scale = pass.scale * plane_scale(kv.k_scale, kv.k_scale_stride, kv_head);
      const int end = (h + 1) * group;
      int qi = h * group;
      for (; qi + 4 <= end; qi += 4) dot_block<kType, 4>(tile, kv_head, score_scale, qi);
      if (qi + 2 <= end) dot_block<kType, 2>(tile, kv_head, score_scale, qi), qi += 2;
      if (qi < end) dot_block<kType, 1>(tile, kv_head, score_scale, qi);
    }
  }

  finish_decode_rows(
      pass, task, r, s, [](int j) { return value_position<kType>(j); },
      [&](int kv_head) { return plane_scale(kv.v_scale, kv.v_scale_stride, kv_head); });
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // per-target include guard
