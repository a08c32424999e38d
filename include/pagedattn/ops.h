// Operations shared by every backend: merging partial attention results by LSE, an FP8 query in
// 16 bits, and vLLM's rule for when cascade attention pays off.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "pagedattn/backend.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"

namespace pagedattn {

// vLLM's merge_attn_states. output / prefix_output / suffix_output [T, H, D] (f32/f16/bf16, one
// dtype); prefix_lse / suffix_lse / output_lse [H, T] float32 natural log. +inf and -inf LSEs mean
// "empty"; two empty sides give prefix_output and -inf. Tokens at or past
// prefill_tokens_with_context (default T) copy the suffix. Runs where the tensors live (CPU, or
// CUDA when built).
Status merge_attn_states(const TensorView& output, const TensorView& prefix_output,
                         const TensorView& prefix_lse, const TensorView& suffix_output,
                         const TensorView& suffix_lse, const TensorView& output_lse = {},
                         std::optional<int64_t> prefill_tokens_with_context = std::nullopt,
                         StreamHandle stream = nullptr);

// An FP8 query as the attention layers read it: output [T, H, D] (f16/bf16; on the CPU f32 too) =
// query [T, H, D] (fp8_e4m3) times scale, rounded to nearest even (exact with no scale: every e4m3
// value is a 16-bit one). scale: none (1), float32 [1], or float32 [num_reqs, num_kv_heads]
// (vLLM's q_descale under FA3), where query head h reads KV head h / (H / num_kv_heads) and
// cu_seqlens_q (int32 [num_reqs + 1], non-decreasing, beside the query) gives each token its
// request; tokens past its last entry (padding) take the last request's. NaN stays NaN. Runs where
// the tensors live.
Status dequantize_fp8_query(const TensorView& output, const TensorView& query,
                            const TensorView& scale = {}, const TensorView& cu_seqlens_q = {},
                            StreamHandle stream = nullptr);

// FlashAttention's use_cascade_attention rule (vLLM's vllm/v1/attention/backends/flash_attn.py).
bool cascade_attention_pays_off(int common_prefix_len, std::span<const int32_t> query_lens,
                                int num_query_heads, int num_kv_heads, bool use_alibi,
                                bool use_sliding_window, bool use_local_attention, int num_sms,
                                int dcp_world_size);

}  // namespace pagedattn
