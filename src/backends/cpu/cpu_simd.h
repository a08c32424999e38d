// The entry points of CPU_ATTN's SIMD code. Each runs the build of the target chosen at run time
// (simd_target.h); the cpu_simd*.cc files are where that choice is made.
#pragma once

#include <cstdint>

#include "backends/cpu/attention_kernel_internal.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu {

// One task of an attention pass: single rows on the decode kernel where it applies
// (decode_task-inl.h), the rest on tiles (attention_task-inl.h).
void run_attention_task(const AttentionPass& pass, const Task& task, Scratch& scratch);

// A decode task (decode_kernel_applies): cpu_simd_decode.cc, or cpu_simd_decode_fp8.cc's
// run_fp8_decode_task for an FP8 cache.
void run_decode_task(const AttentionPass& pass, const Task& task, Scratch& scratch);
void run_fp8_decode_task(const AttentionPass& pass, const Task& task, Scratch& scratch);

// n elements of `dtype` at src (element offset `offset`) as float, times `scale`: how the kernel
// reads queries, keys and values (kv_widen-inl.h). n is a multiple of 8.
void widen_row(const void* src, DType dtype, int64_t offset, int n, float scale, float* dst);

// dst[offset + d] = src[d] * multiplier for d in [0, n), as f32, bf16 or f16 (the output dtypes),
// rounded to nearest even (output_store-inl.h).
void store_output_row(const float* src, int n, float multiplier, DType dtype, void* dst,
                      int64_t offset);

// y[i] = e^x[i] as the online softmax computes it (tile_math-inl.h), for x <= 0, -inf or NaN
// (every exponent the softmax takes: a score less its row's max).
void exp_row(const float* x, int n, float* y);

// The bf16 dot-product micro-kernel of the compute probe (bf16_dot_probe-inl.h): `repeats` passes
// of a register-blocked product of a [rows x k] and a [k x columns] bf16 panel (a holds at least
// 4 * k values, b 64 * k), cache-resident. Sets *flops (2 per multiply-add); returns a checksum.
float bf16_dot_kernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops);
// The same product as the attention kernel computes it: the panels widened to float once, then
// float multiply-adds.
float widened_dot_kernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops);

// The Highway target bit of the code dispatch runs now.
int64_t dispatched_simd_target();

}  // namespace pagedattn::cpu
