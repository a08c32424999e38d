// What both decode kernels (float multiply-adds: decode_task-inl.h; bf16 dot products:
// decode_bf16_dot-inl.h) do around their tiles: the keys a task's row sees, its softmax state at
// the start, and the normalised outputs and LSE at the end.

// Per-target include guard (Highway re-includes this file once per target).
#if defined(PAGEDATTN_CPU_DECODE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDATTN_CPU_DECODE_ROWS_INL_H_
#undef PAGEDATTN_CPU_DECODE_ROWS_INL_H_
#else
#define PAGEDATTN_CPU_DECODE_ROWS_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/attention_kernel_internal.h"
#include "backends/cpu/output_store-inl.h"
#include "backends/cpu/tile_math-inl.h"
#include "common/mask.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

constexpr int kDecodeKeys = 4;  // keys scored together
static_assert(kDecodeTile % kDecodeKeys == 0);
constexpr int kPrefetchTiles = 1;  // how far ahead the prefetcher reads, in tiles

// A decode task's row: its token, and the keys [lo, hi) it sees, pass-local.
struct DecodeRow {
  int64_t token = 0;
  int lo = 0, hi = 0;
  int group = 1;       // query heads per KV head
  int nq = 0;          // query vectors: KV head i / group, its query head i % group
  int first_head = 0;  // query head of vector 0
};

inline DecodeRow decode_row(const AttentionPass& pass, const Task& task) {
  const RequestPass& rp = pass.requests[task.request];
  DecodeRow r;
  r.token = rp.q_start + task.row_begin;
  const int64_t pos = static_cast<int64_t>(rp.query_pos0) + task.row_begin;
  const mask::ShardedMaskRule rule{{pass.causal, pass.window.left, pass.window.right},
                                   pass.key_shard};
  const mask::KeyRange<int64_t> visible =
      mask::visible_keys<int64_t>(rule, int64_t{rp.key_pos0} + rp.kv_len, pos);
  r.lo = static_cast<int>(std::max<int64_t>(visible.lo - rp.key_pos0, 0));
  r.hi = static_cast<int>(std::max<int64_t>(r.lo, visible.hi + 1 - rp.key_pos0));
  r.group = pass.num_heads / pass.num_kv_heads;
  r.nq = (task.kv_head_end - task.kv_head_begin) * r.group;
  r.first_head = task.kv_head_begin * r.group;
  return r;
}

// Softmax state of every query vector (a sink joins the denominator only), outputs zeroed.
inline void start_decode_rows(const AttentionPass& pass, const DecodeRow& r, Scratch& s) {
  for (int i = 0; i < r.nq; ++i) {
    const bool sink = pass.sinks != nullptr;
    s.m[i] = sink ? pass.sinks[r.first_head + i] : kNegInf;
    s.l[i] = sink ? 1.0f : 0.0f;
  }
  std::fill(s.acc.begin(), s.acc.begin() + static_cast<int64_t>(r.nq) * pass.head_size, 0.0f);
}

// Normalises and stores every query vector's output (accumulated at s.acc[i * dim +
// position(j)] for element j), with the values' multiplier value_multiplier(kv_head); a row with
// no visible key and no sink gets 0 and -inf.
template <class Position, class Multiplier>
void finish_decode_rows(const AttentionPass& pass, const Task& task, const DecodeRow& r, Scratch& s,
                        const Position& position, const Multiplier& value_multiplier) {
  const int dim = pass.head_size;
  for (int i = 0; i < r.nq; ++i) {
    const int head = r.first_head + i;
    const float* acc = s.acc.data() + static_cast<int64_t>(i) * dim;
    for (int j = 0; j < dim; ++j) s.row[j] = acc[position(j)];
    const bool empty = s.l[i] == 0.0f;
    const float v_mult = value_multiplier(task.kv_head_begin + i / r.group);
    StoreOutputRow(s.row.data(), dim, empty ? 0.0f : v_mult / s.l[i], pass.output_dtype,
                   pass.output, r.token * pass.o_token_stride + head * pass.o_head_stride);
    if (pass.lse != nullptr) {
      pass.lse[head * pass.lse_head_stride + r.token * pass.lse_token_stride] =
          empty ? kNegInf : s.m[i] + std::log(s.l[i]);
    }
  }
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
