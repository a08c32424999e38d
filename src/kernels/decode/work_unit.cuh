// The parts of a work unit that every pipeline shape of the decode kernel shares: the unit's
// setup (query fragments, score constants, fresh softmax state, the keys every row sees) and
// the compute of one KV tile already in shared memory.
#pragma once

#include "kernels/decode/mainloop_mma.cuh"

namespace pagedattn::kernels::decode {

template <typename Cfg>
struct UnitContext {
  uint32_t qa[Cfg::kKSteps][4];
  ScoreParams sp;
  float v_scale;
  int open_lo;  // keys [open_lo, open_hi] are visible to every row: tiles inside need no mask
  int open_hi;
};

// Issues the loads of the unit's query fragments (the previous unit's epilogue runs while they
// are in flight) and sets its score constants.
template <typename Cfg, typename T>
__device__ __forceinline__ void prepare_unit(const DecodeArgs& a, const UnitWork& w,
                                             UnitContext<Cfg>& c) {
  const DecodeAttentionParams& p = a.p;
  load_q_fragments<Cfg, T>(a, w, c.qa);
  const int scale_idx = p.per_head_scales ? w.kv_head : 0;
  c.sp.qk_scale = Cfg::kFp8 ? p.k_scale[scale_idx] : p.scale;  // FP8: Q carries the scale
  c.v_scale = Cfg::kFp8 ? p.v_scale[scale_idx] : 1.0f;
  const int pos_first = w.kv_len - w.q_len + w.row0 / a.group;
  const int pos_last = w.kv_len - w.q_len + (w.row0 + w.rows - 1) / a.group;
  c.open_lo = unit_visible_keys(a, w, pos_last).lo;
  c.open_hi = unit_visible_keys(a, w, pos_first).hi;
}

// The unit's start: its query fragments in their final form and a fresh softmax state.
template <typename Cfg, typename T>
__device__ __forceinline__ void begin_unit(const DecodeArgs& a, UnitContext<Cfg>& c,
                                           WarpState<Cfg>& st) {
  const DecodeAttentionParams& p = a.p;
  scale_q_fragments<Cfg, T>(a, c.qa);
  c.sp.softcap = mask::soft_cap_applies(p.softcap);
  if (c.sp.softcap) c.sp.cap = mask::make_soft_cap(c.sp.qk_scale, p.softcap, kLog2e);
  c.sp.alibi = p.alibi_slopes != nullptr;
  c.sp.exp_scale = (c.sp.softcap || c.sp.alibi) ? 1.0f : c.sp.qk_scale * kLog2e;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.m[h] = -INFINITY;
    st.l[h] = 0.0f;
  }
#pragma unroll
  for (int dt = 0; dt < 2 * Cfg::kKSteps; ++dt)
#pragma unroll
    for (int i = 0; i < 4; ++i) st.o[dt][i] = 0.0f;
}

// Tile `t` of the unit (K then V at `tile` in shared memory) into the warp's state.
template <typename Cfg, typename T>
__device__ __forceinline__ void compute_tile(const DecodeArgs& a, const UnitWork& w,
                                             const UnitContext<Cfg>& c, WarpState<Cfg>& st, int t,
                                             const char* tile) {
  const int warp_key0 = (threadIdx.x / 32) * Cfg::kWarpKeys;
  const int key0 = t * Cfg::kBlockN;
  const bool need_mask = key0 < c.open_lo || key0 + Cfg::kBlockN - 1 > c.open_hi;
  float s[Cfg::kWarpKeys / 8][4];
  compute_scores<Cfg, T>(s, c.qa, device::smem_addr(tile), warp_key0);
  transform_scores<Cfg::kWarpKeys / 8>(s, c.sp, need_mask, a, w, key0 + warp_key0);
  online_softmax<Cfg>(s, st, c.sp.exp_scale);
  accumulate_pv<Cfg, T>(s, st, device::smem_addr(tile + Cfg::kTileBytes), warp_key0);
}

}  // namespace pagedattn::kernels::decode
