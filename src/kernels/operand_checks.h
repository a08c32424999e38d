// The launch checks every kernel family over the paged KV cache needs, written once over their
// shared parameter block (PagedOperands): the layer's dtypes, FP8 scales, head counts and block
// size, and the memory layout the kernels' vector copies and 32-bit in-block offsets assume.
// Host-only header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/paged_operands.h"
#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::kernels {

inline bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

// q f16/bf16 (where the family reads one, e4m3 over an e4m3 cache); the cache the same or FP8
// with both scales; GQA head counts; blocks of 16k tokens.
inline Status check_layer_fields(std::string_view family, const PagedOperands& p,
                                 bool reads_e4m3_query = false) {
  const std::string f(family);
  const auto str = [](int64_t v) { return std::to_string(v); };
  const bool e4m3_query = reads_e4m3_query && p.q_dtype == DType::kFP8E4M3;
  if (p.q_dtype != DType::kF16 && p.q_dtype != DType::kBF16 && !e4m3_query) {
    return invalid_argument(f + ": q_dtype " + std::string(dtype_name(p.q_dtype)) +
                            " is not supported (allowed: f16, bf16" +
                            (reads_e4m3_query ? ", fp8_e4m3 over an fp8_e4m3 cache" : "") +
                            "; f32 runs on the CPU backend)");
  }
  const bool fp8 = is_fp8(p.cache_dtype);
  if (e4m3_query && p.cache_dtype != DType::kFP8E4M3) {
    return invalid_argument(f + ": an fp8_e4m3 q reads an fp8_e4m3 cache; cache_dtype is " +
                            std::string(dtype_name(p.cache_dtype)));
  }
  if (!fp8 && p.cache_dtype != p.q_dtype) {
    return invalid_argument(f + ": cache_dtype " + std::string(dtype_name(p.cache_dtype)) +
                            " must equal q_dtype " + std::string(dtype_name(p.q_dtype)) +
                            " or be fp8_e4m3/fp8_e5m2");
  }
  if (fp8 && (p.k_scale == nullptr || p.v_scale == nullptr)) {
    return invalid_argument(f + ": an FP8 cache needs k_scale and v_scale");
  }
  if (p.num_kv_heads <= 0 || p.num_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return invalid_argument(f + ": num_heads " + str(p.num_heads) +
                            " must be a positive multiple of num_kv_heads " + str(p.num_kv_heads));
  }
  if (p.block_size <= 0 || p.block_size % 16 != 0) {
    return invalid_argument(f + ": block_size " + str(p.block_size) +
                            " must be a positive multiple of 16");
  }
  return ok_status();
}

// 16-byte copies of Q and of 16-bit K/V rows (8-byte FP8 rows), 8-byte stores of out, and block
// rows addressed with 32-bit element offsets inside a block (block * stride is 64-bit; K and V are
// two base pointers, so their distance is not an offset the kernels compute).
inline Status check_operand_layout(std::string_view family, const PagedOperands& p) {
  const std::string f(family);
  const auto str = [](int64_t v) { return std::to_string(v); };
  const int64_t cache_strides[] = {p.cache_block_stride, p.cache_token_stride, p.cache_head_stride};
  const int cache_alignment = is_fp8(p.cache_dtype) ? 8 : 16;
  bool cache_ok = aligned(p.k_cache, cache_alignment) && aligned(p.v_cache, cache_alignment);
  for (int64_t s : cache_strides) cache_ok = cache_ok && s % 8 == 0;
  if (!cache_ok) {
    return invalid_argument(f +
                            ": k_cache and v_cache must be 16-byte aligned (8 for FP8) with "
                            "strides that are multiples of 8 elements");
  }
  const int64_t max_in_block = (p.block_size - 1) * p.cache_token_stride +
                               (p.num_kv_heads - 1) * p.cache_head_stride + p.head_size;
  for (int64_t s : cache_strides) cache_ok = cache_ok && s >= 0 && s <= INT32_MAX;
  if (!cache_ok || max_in_block > INT32_MAX) {
    return invalid_argument(f + ": cache strides (block " + str(p.cache_block_stride) + ", token " +
                            str(p.cache_token_stride) + ", head " + str(p.cache_head_stride) +
                            ") must be non-negative and below 2^31 elements, as must the largest "
                            "offset inside a block (" +
                            str(max_in_block) + ")");
  }
  if (!aligned(p.q, 16) || p.q_token_stride % 8 != 0 || p.q_head_stride % 8 != 0) {
    return invalid_argument(f + ": q must be 16-byte aligned with strides that are multiples of 8");
  }
  if (!aligned(p.out, 8) || p.out_token_stride % 4 != 0 || p.out_head_stride % 4 != 0) {
    return invalid_argument(f +
                            ": out must be 8-byte aligned with strides that are multiples of 4");
  }
  return ok_status();
}

}  // namespace pagedattn::kernels
