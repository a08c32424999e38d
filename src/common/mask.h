// The one definition of which keys a query sees and of the score transforms, shared by the GPU
// kernels, the CPU kernel, the float64 oracle and the benchmarks' FLOP counts.
//
// Positions are absolute in the request's sequence: keys 0 .. kv_len - 1, and a query at position
// pos (the new tokens are the last ones: pos = kv_len - q_len + i). Causal masking is bottom-right
// aligned (a query sees keys up to its own position); a sliding window (left, right) also bounds
// it to [pos - left, pos + right], each side unbounded when negative.
//
// Under decode context parallelism a pass may see one rank's share of the keys (a key_shard): the
// query keeps its absolute position and the visible range is given in the rank's local keys.
//
// Score transforms, applied in this order to s = scale * q . k: soft cap (cap * tanh(s / cap),
// none when cap <= 0), then ALiBi (- slope * |pos - key|).
#pragma once

#include <algorithm>
#include <cmath>

#include "common/host_device.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn::mask {

// The shard's rank's keys below absolute position pos >= 0 (pagedattn/dcp_sharding.h: key k lives
// on rank (k / interleave) % world_size): the local index of its first key at or after pos.
template <typename Int>
PAGEDATTN_HOST_DEVICE inline Int local_keys_below(const DcpShard& shard, Int pos) {
  const Int run = Int{shard.interleave} * shard.world_size;
  const Int into_run = pos % run - Int{shard.rank} * shard.interleave;
  const Int into_own = into_run < 0                  ? Int{0}
                       : into_run > shard.interleave ? Int{shard.interleave}
                                                     : into_run;
  return pos / run * shard.interleave + into_own;
}

struct MaskRule {
  bool causal = true;
  int window_left = -1;   // < 0: unbounded
  int window_right = -1;  // < 0: unbounded
};

// A rule over one rank's keys (the kernels that serve such passes have the field in their
// parameter block; the others compile no branch for it).
struct ShardedMaskRule : MaskRule {
  DcpShard key_shard;  // world_size 1: the whole sequence
};
template <typename Rule>
concept HasKeyShard = requires(const Rule& rule) {
  rule.key_shard.world_size;
};

// Visible keys [lo, hi] (inclusive; hi < lo: none) of a query.
template <typename Int>
struct KeyRange {
  Int lo;
  Int hi;
};

// The keys among kv_len local keys (key_shard's) that the query at absolute position pos sees: the
// absolute bounds, then the rank's keys inside them.
template <typename Int, typename Rule>
PAGEDATTN_HOST_DEVICE inline KeyRange<Int> sharded_visible_keys(const Rule& rule, Int kv_len,
                                                                Int pos) {
  const DcpShard& shard = rule.key_shard;
  Int end = kv_len;  // exclusive
  if (rule.causal) {
    const Int below = local_keys_below(shard, pos + 1);
    if (below < end) end = below;
  }
  if (rule.window_right >= 0) {
    const Int below = local_keys_below(shard, pos + rule.window_right + 1);
    if (below < end) end = below;
  }
  const Int first =
      rule.window_left >= 0 && pos > rule.window_left ? pos - rule.window_left : Int{0};
  return {local_keys_below(shard, first), end - 1};
}

// The keys that the query at position pos sees among kv_len. Rule: a MaskRule, or any struct with
// its fields (the GPU kernels pass their parameter block, whose fields are read only where
// needed). Int: int on the GPU, int64_t on the host.
template <typename Int, typename Rule>
PAGEDATTN_HOST_DEVICE inline KeyRange<Int> visible_keys(const Rule& rule, Int kv_len, Int pos) {
  if constexpr (HasKeyShard<Rule>) {
    if (rule.key_shard.world_size > 1) return sharded_visible_keys(rule, kv_len, pos);
  }
  Int hi = kv_len - 1;
  if (rule.causal && pos < hi) hi = pos;
  if (rule.window_right >= 0 && pos + rule.window_right < hi) hi = pos + rule.window_right;
#if defined(__CUDA_ARCH__)
  const Int lo = rule.window_left >= 0 ? max(Int{0}, pos - rule.window_left) : Int{0};
#else
  const Int lo = rule.window_left >= 0 ? std::max(Int{0}, pos - rule.window_left) : Int{0};
#endif
  return {lo, hi};
}

// Caps from 2^100 on change no score below 2^88 in float (tanh(y) = y to float precision for
// |y| < 2^-12), so the kernels skip them: folded with log2(e), a cap near float's maximum would
// overflow, and scale / cap would lose precision as a denormal.
inline constexpr float kSoftCapNoOp = 0x1p100f;
PAGEDATTN_HOST_DEVICE inline bool soft_cap_applies(float cap) {
  return cap > 0.0f && cap < kSoftCapNoOp;
}

// The soft cap folded with the score's scale and the softmax's base: for a raw score x = q . k,
// post * tanh(x * pre) = out_scale * cap * tanh(scale * x / cap). tanh itself is accurate as its
// argument goes to 0 (tanh(y) ~ y), so every cap, however large, leaves the scaled score intact
// rather than losing it to cancellation as a ratio of exponentials would.
template <typename F>
struct SoftCap {
  F pre;
  F post;
};

template <typename F>
PAGEDATTN_HOST_DEVICE inline SoftCap<F> make_soft_cap(F scale, F cap, F out_scale) {
  return {scale / cap, cap * out_scale};
}

template <typename F>
PAGEDATTN_HOST_DEVICE inline F tanh_of(F y) {
#if defined(__CUDA_ARCH__)
  return tanhf(y);
#else
  return std::tanh(y);
#endif
}

template <typename F>
PAGEDATTN_HOST_DEVICE inline F soft_capped(const SoftCap<F>& cap, F raw_score) {
  return cap.post * tanh_of(raw_score * cap.pre);
}

// The ALiBi bias subtracted from the score of (query at pos, key): slope * |pos - key|. The
// distance is converted first: exact in float, positions stay far below 2^24.
template <typename F, typename Int>
PAGEDATTN_HOST_DEVICE inline F alibi_bias(F slope, Int pos, Int key) {
#if defined(__CUDA_ARCH__)
  return slope * fabsf(static_cast<F>(pos - key));
#else
  return slope * std::fabs(static_cast<F>(pos - key));
#endif
}

}  // namespace pagedattn::mask
