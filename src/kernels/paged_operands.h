// The parameter block every attention kernel family over the paged cache takes: the queries, the
// cache's two planes, the layer's attention parameters and the output. PagedAttentionParams and
// DecodeAttentionParams extend it with their own schedules. Host-only header: no CUDA types.
#pragma once

#include <cstdint>

#include "pagedattn/types.h"

namespace pagedattn::kernels {

struct PagedOperands {
  // Queries of all requests, packed: [num_tokens, num_heads, head_size], strides in elements.
  const void* q = nullptr;
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;
  DType q_dtype = DType::kBF16;  // f16 or bf16, the output's too (the v3 FP8 kernel: or fp8_e4m3)

  // Paged cache: the K and the V plane, each logical [num_blocks, block_size, num_kv_heads,
  // head_size], at any two addresses with one set of strides (NHD or HND), in elements of
  // cache_dtype (q_dtype, fp8_e4m3 or fp8_e5m2).
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  DType cache_dtype = DType::kBF16;
  int64_t cache_block_stride = 0;
  int64_t cache_token_stride = 0;  // within a block
  int64_t cache_head_stride = 0;
  const float* k_scale = nullptr;  // FP8: [1] or [num_kv_heads] (per_head_scales), device
  const float* v_scale = nullptr;
  bool per_head_scales = false;
  const int32_t* block_table = nullptr;  // [num_reqs, block_table_stride] device
  int64_t block_table_stride = 0;

  // The layer.
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 0;  // multiple of 16
  float scale = 1.0f;
  float softcap = 0.0f;                 // <= 0: none
  const float* alibi_slopes = nullptr;  // [num_heads] device or nullptr
  const float* sinks = nullptr;         // [num_heads] device or nullptr
  int window_left = -1;                 // keys pos - window_left .. (-1: unbounded)

  // Output [num_tokens, num_heads, head_size] (q_dtype; bf16 for an e4m3 q) and optional LSE
  // [num_heads, lse_head_stride] float32, natural log (nullptr = not requested).
  void* out = nullptr;
  int64_t out_token_stride = 0;
  int64_t out_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_head_stride = 0;
};

}  // namespace pagedattn::kernels
