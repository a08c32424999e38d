// Host interface of the GQA-packed decode kernel family: one CTA holds the query rows of a KV
// group (q_len * G rows, 16 per tile), so each K/V byte it reads serves every query head of the
// group; a fixed grid of CTAs walks the units of a host-made plan (kernels/decode/work.h),
// and the CTA that finishes a split segment's last unit merges its units by LSE. Host-only
// header: no CUDA types. The launcher is the family's one dispatch point (head size, dtypes ->
// template parameters).
#pragma once

#include <cstdint>

#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::kernels {

struct DecodeAttentionParams {
  // Queries, packed: [num_tokens, num_heads, head_size], strides in elements; f16 or bf16.
  const void* q = nullptr;
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;
  DType q_dtype = DType::kBF16;

  // Paged cache: the K and the V plane, each logical [num_blocks, block_size, num_kv_heads,
  // head_size], at any two addresses with one set of strides (NHD or HND), in elements of
  // cache_dtype (q_dtype, fp8_e4m3 or fp8_e5m2).
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  DType cache_dtype = DType::kBF16;
  int64_t cache_block_stride = 0;
  int64_t cache_token_stride = 0;
  int64_t cache_head_stride = 0;
  const float* k_scale = nullptr;  // FP8: [1] or [num_kv_heads] (per_head_scales), device
  const float* v_scale = nullptr;
  bool per_head_scales = false;

  const int32_t* block_table = nullptr;  // [num_reqs, block_table_stride] int32, device
  int64_t block_table_stride = 0;

  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 0;  // multiple of 16

  float scale = 1.0f;
  float softcap = 0.0f;                 // <= 0: none
  const float* alibi_slopes = nullptr;  // [num_heads] device or nullptr
  const float* sinks = nullptr;         // [num_heads] device or nullptr
  int window_left = -1;                 // causal decode: keys pos - window_left .. pos

  // Output [num_tokens, num_heads, head_size] (q_dtype) and optional LSE [num_heads,
  // lse_head_stride] float32, natural log.
  void* out = nullptr;
  int64_t out_token_stride = 0;
  int64_t out_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_head_stride = 0;

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
