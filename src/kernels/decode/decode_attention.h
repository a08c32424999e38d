// Host interface of the GQA-packed decode kernel family: one CTA holds the query rows of a KV
// group (q_len * G rows, 16 per tile), so each K/V byte it reads serves every query head of the
// group; a fixed grid of CTAs walks the units of a host-made plan (kernels/decode/work.h),
// and the CTA that finishes a split segment's last unit merges its units by LSE. Host-only
// header: no CUDA types. The launcher is the family's one dispatch point (head size, dtypes ->
// template parameters).
#pragma once

#include <cstdint>

#include "kernels/paged_operands.h"
#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::kernels {

// The shared operands (causal decode: window_left only) and the family's plan.
struct DecodeAttentionParams : PagedOperands {
  // The plan on the device (decode/work.h layout) and the f32 partials of split segments:
  // partial_out [rows, head_size], partial_lse [rows]. num_ctas is the grid the plan was made for.
  const void* plan = nullptr;
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
  int num_ctas = 0;
};

// The largest head size with decode instantiations (512 is served by the paged attention family).
inline constexpr int kMaxDecodeHeadSize = 256;

// Head sizes with a decode kernel in this build: multiples of 8 up to the largest built kernel
// head size not above kMaxDecodeHeadSize, each served by the next built size.
int decode_attention_kernel_head_size(int head_size);  // 0 = none

// CTAs of the decode kernel one SM holds at once for these types (the plan's num_ctas is this
// times the SM count); 0 when there is no kernel or no CUDA.
int decode_attention_ctas_per_sm(int head_size, DType q_dtype, DType cache_dtype);

// Validates, then launches the decode kernel (a fixed grid: CUDA-graph safe for any plan made for
// num_ctas; the plan's merge counts return to 0 by the end of every launch). stream: cudaStream_t.
Status launch_decode_attention(const DecodeAttentionParams& params, void* stream);

}  // namespace pagedattn::kernels
