// Host side of the Hopper ("v3") attention kernels: wgmma + TMA, warp-specialised, sm_90a only.
// Host-only header. Today one prefill kernel: head sizes 64, 96, 128, 192 and 256 (those of them
// this build instantiates), bf16 Q and cache, block sizes that are multiples of the KV tile (128
// keys; 64 at head sizes 192 and 256) or multiples of 16 dividing it, prefill-shaped launches
// (decode-shaped ones too with GQA packing, PagedAttentionParams::pack_gqa), causal or not, sliding
// windows, soft cap, ALiBi, sinks and split-KV (bf16 cache; the FP8 kernel has none of them);
// anything else is an Unimplemented status naming what is missing, so a caller can fall back to v2.
#pragma once

#include "kernels/attention/paged_attention.h"
#include "pagedattn/status.h"

namespace pagedattn::kernels::detail {

// How the prefill kernel's CTAs take the work tiles (request, query head, 128 or 192 query rows),
// and how its producer copies K/V. The dispatch uses the defaults.
struct V3Grid {
  bool persistent = true;  // one CTA per SM, each walking many tiles; false: one CTA per tile (the
                           // first v3 kernel's grid, kept for comparisons)
  int max_ctas = 0;        // > 0: at most this many CTAs (tests give each CTA many tiles)
  // Producer warps issuing a KV tile's TMA boxes (1 to 4, at most one per box: a box per page, or
  // per page and 64-column panel). One issuing thread takes a few hundred cycles a box, so at block
  // 16 one warp ran 345 TFLOP/s and four 557 at 1 x 8192 D 128.
  int box_warps = 4;
  // Pages smaller than the tile: one box per page and 64-column panel even where the group map
  // gives one per page (kernels/paged_kv_map.h; the layouts without a group map take this path).
  bool page_panel_boxes = false;
  // The consumers' turn trace (kernels/attention/v3/prefill_trace.h: trace_entries(2) long longs on
  // the device), or null: run by a kernel of its own, the bf16 kernel's at head sizes 128 and 256
  // without score transforms or GQA packing, or the FP8 kernel's kFp8TuneTrace variant.
  long long* trace = nullptr;
};

// Same contract as the v2 launcher: params validated by launch_paged_attention, kernel_head_size
// the instantiated size (v3 serves the sizes it is built for exactly). stream: cudaStream_t.
Status launch_paged_attention_v3(const PagedAttentionParams& params, int kernel_head_size,
                                 void* stream);
Status launch_paged_attention_v3_scheduled(const PagedAttentionParams& params, int kernel_head_size,
                                           void* stream, V3Grid grid);

// OK when the v3 kernel serves this launch on the current device; else Unimplemented naming what
// is missing (the caller may run v2 instead).
Status paged_attention_v3_serves(const PagedAttentionParams& params);

}  // namespace pagedattn::kernels::detail
