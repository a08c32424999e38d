// The end of a v3 prefill work tile for one consumer warpgroup: O normalised by the row sums and
// stored as bf16 with the LSE (natural log), rows past the request's queries left alone. Either
// straight from the accumulators (4-byte stores, two rows per thread) or, where PrefillSmem has
// the room (D 64 and 128), staged through shared memory and written as 16-byte row segments; with
// split-KV, f32 partials for the combine.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/mma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/rows.cuh"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/attention/v3/softmax.cuh"
#include "kernels/attention/v3/tile_scheduler.cuh"

namespace pagedattn::kernels::attention::v3 {

// A row's output factor (O times it is the output) and LSE (natural log).
struct RowEnd {
  float inv;
  float lse;
};

// From the row's reference maximum m (score units, -inf before any visible key) and its sum l
// over the quad; with sinks, the head's sink joins the normaliser only (docs/attention.md):
// m' = max(m, sink), l' = l 2^(m - m') + 2^(sink - m') in base 2, O scaled by 2^(m - m') / l'.
// A row with no visible key has out = 0 and LSE -inf, or the sink's logit with a sink.
__device__ __forceinline__ RowEnd end_row(float m, float l, const PrefillArgs& a, int head) {
  if (a.sinks == nullptr)
    return {l > 0.0f ? 1.0f / l : 0.0f, l > 0.0f ? m * a.scale + logf(l) : -INFINITY};
  const float m2 = m * a.scale_log2, sink2 = a.sinks[head] * 1.4426950408889634f;
  const float top = fmaxf(m2, sink2);
  if (top == -INFINITY) return {0.0f, -INFINITY};
  const float keep = exp2f(m2 - top);  // 0 without a visible key
  const float total = l * keep + exp2f(sink2 - top);
  return {keep / total, (top + log2f(total)) * 0.6931471805599453f};
}

// Normalises this thread's two rows (v3/rows.cuh) when they belong to the request and hands
// them on: pair(token, head, col, x, y) for columns col, col + 1 below kD (at D 96 the chunk's
// columns 96..127 are not the output's), lse(token, head, value) once per row.
template <int kD, int kChunks, int kRegs, typename Pair, typename Lse>
__device__ __forceinline__ void normalised_rows(const float (&o)[kChunks][kRegs],
                                                const RowState& st, const PrefillArgs& a,
                                                const PrefillTile& w, const ThreadRows& rows,
                                                Pair pair, Lse lse) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = rows.pos[h];
    if (r >= w.q_len) continue;
    const int64_t token = w.q_start + r;
    const int head = rows.head[h];
    const RowEnd end = end_row(st.m[h], l, a, head);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kRegs / 4; ++j) {
        const int col = c * 2 * kRegs + 8 * j + 2 * t;
        if (col - 2 * t >= kD) break;
        pair(token, head, col, o[c][4 * j + 2 * h] * end.inv, o[c][4 * j + 2 * h + 1] * end.inv);
      }
    }
    if (t == 0) lse(token, head, end.lse);
  }
}

// The output (bf16 pairs, 4-byte stores) and LSE of this thread's rows.
template <int kD, int kChunks, int kRegs>
__device__ __forceinline__ void store_rows(const float (&o)[kChunks][kRegs], const RowState& st,
                                           const PrefillArgs& a, const PrefillTile& w,
                                           const ThreadRows& rows) {
  normalised_rows<kD>(
      o, st, a, w, rows,
      [&](int64_t token, int head, int col, float x, float y) {
        *reinterpret_cast<uint32_t*>(a.out + head * a.out_head_stride + token * a.out_token_stride +
                                     col) = device::pack_float2<__nv_bfloat16>(x, y);
      },
      [&](int64_t token, int head, float lse) {
        if (a.lse != nullptr) a.lse[head * a.lse_head_stride + token] = lse;
      });
}

// A split's partial (split-KV): the normalised output in f32 and the LSE, without sinks (the
// combine adds them once).
template <int kD, int kChunks, int kRegs>
__device__ __forceinline__ void store_split_rows(const float (&o)[kChunks][kRegs],
                                                 const RowState& st, const PrefillArgs& a,
                                                 const PrefillTile& w, const ThreadRows& rows) {
  const int64_t token_stride = int64_t{a.num_heads} * kD;
  float* split = a.split_out + int64_t{w.split} * a.num_tokens * token_stride;
  normalised_rows<kD>(
      o, st, a, w, rows,
      [&](int64_t token, int head, int col, float x, float y) {
        *reinterpret_cast<float2*>(split + token * token_stride + head * kD + col) =
            make_float2(x, y);
      },
      [&](int64_t token, int head, float lse) {
        a.split_lse[(int64_t{w.split} * a.num_heads + head) * a.num_tokens + token] = lse;
      });
}

// An empty split's partial for one row (position pos within the request, query head `head`): LSE
// -inf, so the combine gives it no weight, and zeros, since the combine loads every part's output
// before it reads the weights (compute-sanitizer's initcheck flagged those reads).
template <int kD>
__device__ __forceinline__ void store_empty_split_row(const PrefillArgs& a, const PrefillTile& w,
                                                      int pos, int head) {
  if (pos >= w.q_len) return;
  const int64_t token = w.q_start + pos;
  a.split_lse[(int64_t{w.split} * a.num_heads + head) * a.num_tokens + token] = -INFINITY;
  float* row = a.split_out + ((int64_t{w.split} * a.num_tokens + token) * a.num_heads + head) * kD;
#pragma unroll 4
  for (int col = 0; col < kD; col += 2) {
    *reinterpret_cast<float2*>(row + col) = make_float2(0.0f, 0.0f);
  }
}

// The same for a consumer's 64 rows (its warpgroup's first tile row: first_tile_row).
template <int kD, bool kPacked>
__device__ __forceinline__ void store_empty_split(const PrefillArgs& a, const PrefillTile& w,
                                                  int first_tile_row) {
  const int r = first_tile_row + static_cast<int>(threadIdx.x % 128);
  if (threadIdx.x % 128 >= 64) return;
  if constexpr (kPacked) {
    store_empty_split_row<kD>(a, w, packed_position(a, w, r), w.head + r % a.group);
  } else {
    store_empty_split_row<kD>(a, w, w.q0 + r, w.head);
  }
}

// The output factors of this thread's rows (end_row), and the LSE of each row written once.
__device__ __forceinline__ void row_sums(const RowState& st, const PrefillArgs& a,
                                         const PrefillTile& w, int row, float (&inv)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const RowEnd end = end_row(st.m[h], l, a, w.head);
    inv[h] = end.inv;
    const int r = row + 8 * h;
    if (a.lse != nullptr && threadIdx.x % 4 == 0 && r < w.q_len) {
      a.lse[w.head * a.lse_head_stride + w.q_start + r] = end.lse;
    }
  }
}

// Staged store of the warpgroup's 64 rows: each thread writes its normalised O as bf16 pairs into
// `stage` (64-column panels of 128-byte rows, 128-byte swizzled: a warp's pairs fall in 32
// distinct banks), the warpgroup meets on named barrier `barrier`, then thread i copies 16-byte
// chunks (row i / (D / 8) of every pass) to global memory, a row's D * 2 bytes contiguous. The
// next write to `stage` comes after the next turn barrier, which orders this warpgroup's threads.
template <int kD, int kChunks, int kRegs>
__device__ __forceinline__ void store_rows_staged(const float (&o)[kChunks][kRegs],
                                                  const RowState& st, const PrefillArgs& a,
                                                  const PrefillTile& w, int row, int first_row,
                                                  uint8_t* stage, int barrier) {
  float inv[2];
  row_sums(st, a, w, row, inv);
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t r = static_cast<uint32_t>(row + 8 * h - first_row);  // 0 .. 63
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kRegs / 4; ++j) {
        const int col = c * 2 * kRegs + 8 * j;  // of the chunk's 16 bytes
        uint8_t* panel = stage + (col / 64) * (64 * 128);
        *reinterpret_cast<uint32_t*>(panel + device::swizzle128_offset(r, (col % 64) / 8) + 4 * t) =
            device::pack_float2<__nv_bfloat16>(o[c][4 * j + 2 * h] * inv[h],
                                               o[c][4 * j + 2 * h + 1] * inv[h]);
      }
    }
  }
  device::named_barrier_sync(barrier, 128);
  constexpr int kRowChunks = kD / 8;
  constexpr int kRowsPerPass = 128 / kRowChunks;
  const int tid = threadIdx.x % 128, chunk = tid % kRowChunks;
  uint16_t* head = a.out + w.head * a.out_head_stride + chunk * 8;
  const uint8_t* panel = stage + (chunk / 8) * (64 * 128);
#pragma unroll
  for (int pass = 0; pass < 64 / kRowsPerPass; ++pass) {
    const int r = pass * kRowsPerPass + tid / kRowChunks;
    const uint4 v =
        *reinterpret_cast<const uint4*>(panel + device::swizzle128_offset(r, chunk % 8));
    if (first_row + r < w.q_len) {
      *reinterpret_cast<uint4*>(head + (w.q_start + first_row + r) * a.out_token_stride) = v;
    }
  }
}

}  // namespace pagedattn::kernels::attention::v3
