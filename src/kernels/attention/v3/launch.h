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

// Same contract as the v2 launcher: params validated by launch_paged_attention, kernel_head_size
// the instantiated size (v3 serves the sizes it is built for exactly). stream: cudaStream_t. The
// grid is persistent: one CTA per SM (or per work tile, when there are fewer), each walking many
// tiles.
Status launch_paged_attention_v3(const PagedAttentionParams& params, int kernel_head_size,
                                 void* stream);
// Test hook: the same launch on at most max_ctas CTAs, so that tests give each CTA many work tiles
// (the rings and the tile walk run on across requests and heads).
Status launch_paged_attention_v3_few_ctas(const PagedAttentionParams& params, int kernel_head_size,
                                          void* stream, int max_ctas);

// OK when the v3 kernel serves this launch on the current device; else Unimplemented naming what
// is missing (the caller may run v2 instead).
Status paged_attention_v3_serves(const PagedAttentionParams& params);

}  // namespace pagedattn::kernels::detail
