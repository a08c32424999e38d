// FlashAttention's use_cascade_attention heuristic (vLLM's vllm/v1/attention/backends/flash_attn.py).
#include <algorithm>
#include <cstdint>
#include <span>

#include "pagedattn/ops.h"

namespace pagedattn {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

bool cascade_attention_pays_off(int common_prefix_len, std::span<const int32_t> query_lens,
                                int num_query_heads, int num_kv_heads, bool use_alibi,
                                bool use_sliding_window, bool use_local_attention, int num_sms,
                                int dcp_world_size) {
  // Too short a prefix to be worth a second kernel launch.
  if (common_prefix_len < 256) return false;
  // The cascade passes cannot express these masks or position biases.
  if (use_alibi || use_sliding_window || use_local_attention) return false;
  const int64_t num_reqs = static_cast<int64_t>(query_lens.size());
  if (num_reqs < 8) return false;
  if (dcp_world_size > 1) return false;
  if (num_query_heads <= 0 || num_kv_heads <= 0) return false;

  // Without FlashDecoding, plain attention reads the prefix once per request: cascade saves that.
  const int64_t queries_per_kv = num_query_heads / num_kv_heads;
  const bool all_decode =
      std::all_of(query_lens.begin(), query_lens.end(), [](int32_t len) { return len == 1; });
  const bool use_flash_decoding =
      queries_per_kv > 1 && !use_sliding_window && !use_alibi && all_decode;
  if (!use_flash_decoding) return true;

  // Otherwise compare a wave-count cost model of the two schedules over 128 x 128 tiles.
  const int64_t sms = std::max(num_sms, 1);
  constexpr int64_t kTile = 128;
  const int64_t num_prefix_tiles = ceil_div(common_prefix_len, kTile);
  const int64_t cascade_ctas = num_query_heads * ceil_div(num_reqs, kTile);
  const int64_t cascade_time = ceil_div(cascade_ctas, sms) * num_prefix_tiles;
  const int64_t flash_decoding_ctas =
      num_reqs * num_kv_heads * ceil_div(queries_per_kv, kTile) * num_prefix_tiles;
  const int64_t flash_decoding_time = ceil_div(flash_decoding_ctas, sms);
  return cascade_time < flash_decoding_time;
}

}  // namespace pagedattn
