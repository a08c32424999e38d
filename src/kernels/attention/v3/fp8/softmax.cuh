// The online softmax of the v3 FP8 prefill kernel's consumers and their row store. P is
// exp2(score - base + offset) rounded to e4m3 next, so P's largest value, 2^offset times
// 2^(max - base), must stay below e4m3's 448 = 2^8.807. The softmax is lazy: a row's base moves only
// when its maximum passes it by more than kLazyThreshold (log2 units), with offset 6, so P stays
// below 2^8.75; between moves alpha is exactly 1 and a warp whose rows all kept their base skips
// O's rescale. After the first tiles a row's maximum seldom grows by that much (Gaussian scores:
// about 2 log2 units from 128 to 8192 keys), so most tiles rescale nothing. Probabilities below
// 2^-12 of the base fall into e4m3's subnormals: a negligible share of a row's mass. The row sums
// come from the tensor cores (v3/fp8/mainloop_mma.cuh), so 2^offset cancels in O / l and the LSE
// subtracts it.
#pragma once

#include <cmath>
#include <cstdint>

#include "device/convert.cuh"
#include "kernels/attention/v3/mainloop_mma.cuh"

namespace pagedattn::kernels::attention::v3 {

inline constexpr float kLazyOffset = 6.0f;
inline constexpr float kLazyThreshold = 2.75f;  // 2^(6 + 2.75) = 430 < 448

// Row h's values of the thread (kRegs / 2 of them) reduced by `op` in four interleaved chains:
// a quarter of one serial chain's dependent steps.
template <int kRegs, typename Op>
__device__ __forceinline__ float reduce_row(const float (&s)[kRegs], int h, Op op) {
  static_assert(kRegs % 8 == 0, "two n8 blocks per step");
  float r0 = s[2 * h], r1 = s[2 * h + 1], r2 = s[4 + 2 * h], r3 = s[4 + 2 * h + 1];
#pragma unroll
  for (int j = 2; j < kRegs / 4; j += 2) {
    r0 = op(r0, s[4 * j + 2 * h]);
    r1 = op(r1, s[4 * j + 2 * h + 1]);
    r2 = op(r2, s[4 * j + 4 + 2 * h]);
    r3 = op(r3, s[4 * j + 4 + 2 * h + 1]);
  }
  return op(op(r0, r1), op(r2, r3));
}

// The lazy softmax (above) with the score scale of each row (scale_log2[h], the row's Q descale
// folded in), maxima by reduce_row; st.m holds each row's base (raw scores), st.l is left to the
// caller. Returns whether a base of the thread moved (else alpha is exactly 1).
template <int kRegs>
__device__ __forceinline__ bool softmax_tile_fp8_lazy(float (&s)[kRegs], RowState& st,
                                                      const float (&scale_log2)[2],
                                                      float (&alpha)[2]) {
  const auto max_op = [](float a, float b) { return fmaxf(a, b); };
  bool moved = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = reduce_row(s, h, max_op);
    mx = quad_max(mx);
    // The first visible key sets the base (inf > threshold); no visible key yet keeps -inf (NaN).
    const bool move = (mx - st.m[h]) * scale_log2[h] > kLazyThreshold;
    const float m = move ? mx : st.m[h];
    const float base = m == -INFINITY ? 0.0f : m * scale_log2[h];  // no visible key yet: no NaN
    alpha[h] = move ? device::fast_exp2(st.m[h] * scale_log2[h] - base) : 1.0f;
    moved = moved || move;
    st.m[h] = m;
    const float offset = kLazyOffset - base;
#pragma unroll
    for (int i = 0; i < kRegs / 2; ++i) {
      float& x = s[4 * (i / 2) + 2 * h + i % 2];
      const float arg = fmaf(x, scale_log2[h], offset);
      x = device::fast_exp2(arg);
    }
  }
  return moved;
}

// Normalises and stores the rows that belong to the request, as the bf16 kernel's store_rows with
// the FP8 factors: O times v_scale / l, LSE = the row's scaled base less the offset (log 2) plus
// log(l). Its own function (not store_rows with adjusted inputs): the bf16 store's signature moves
// with the bf16 kernel's epilogue. st.l holds each row's whole sum.
template <int kChunks, int kRegs>
__device__ __forceinline__ void store_rows_fp8(const float (&o)[kChunks][kRegs], const RowState& st,
                                               const float (&scale_log2)[2], float p_offset,
                                               float v_scale, const PrefillArgs& a,
                                               const PrefillTile& w, int row) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = st.l[h];
    const int r = row + 8 * h;
    if (r >= w.q_len) continue;
    const int64_t token = w.q_start + r;
    const float factor = l > 0.0f ? v_scale / l : 0.0f;
    uint16_t* dst = a.out + token * a.out_token_stride + w.head * a.out_head_stride + 2 * t;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kRegs / 4; ++j) {
        *reinterpret_cast<uint32_t*>(dst + c * 2 * kRegs + 8 * j) =
            device::pack_float2<__nv_bfloat16>(o[c][4 * j + 2 * h] * factor,
                                               o[c][4 * j + 2 * h + 1] * factor);
      }
    }
    if (a.lse != nullptr && t == 0) {
      a.lse[w.head * a.lse_head_stride + token] =
          l > 0.0f ? (st.m[h] * scale_log2[h] - p_offset) * 0.6931471805599453f + logf(l)
                   : -INFINITY;
    }
  }
}

}  // namespace pagedattn::kernels::attention::v3
