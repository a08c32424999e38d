// Host side of the Hopper ("v3") attention kernels: wgmma + TMA, warp-specialised, sm_90a only.
// Host-only header. Today one prefill kernel: head size 128, bf16 Q and cache, block sizes that are
// multiples of 128, causal or not, no ALiBi / soft cap / sinks / sliding window / split-KV;
// anything else is an Unimplemented status naming what is missing, so a caller can fall back to v2.
#pragma once

#include "kernels/attention/paged_attention.h"
#include "pagedattn/status.h"

namespace pagedattn::kernels::detail {

// Same contract as the v2 launcher: params validated by launch_paged_attention, kernel_head_size
// the instantiated size (v3 serves 128 only). stream: cudaStream_t.
Status launch_paged_attention_v3(const PagedAttentionParams& params, int kernel_head_size,
                                 void* stream);

// OK when the v3 kernel serves this launch on the current device; else Unimplemented naming what
// is missing (the caller may run v2 instead).
Status paged_attention_v3_serves(const PagedAttentionParams& params);

}  // namespace pagedattn::kernels::detail
