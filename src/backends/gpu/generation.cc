// The rule of generation.h (host code, built with or without CUDA).
#include "backends/gpu/generation.h"

#include <algorithm>

#include "backends/gpu/head_sizes.h"

namespace pagedattn::gpu {

bool decodes_favour_v2(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                       int num_heads, int num_kv_heads, bool causal) {
  const int group = num_heads / std::max(1, num_kv_heads);
  double prefill_score_pairs = 0.0, decode_keys = 0.0;  // query rows x visible keys; keys
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const double q = query_start_loc[r + 1] - query_start_loc[r], k = seq_lens[r];
    if (q * group <= 16) {
      decode_keys += q > 0 ? k : 0.0;
    } else {
      prefill_score_pairs += q * (causal ? k - q / 2 : k);
    }
  }
  // Time saved on the prefills, 4 D Hq pairs FLOPs at v2's ~330 and v3's ~600 TFLOP/s, against
  // the extra reads of the decodes, (Hq - Hkv) D 4 bytes per key at ~4 TB/s (16-bit K and V): v3
  // wins while Hq pairs > 183 (Hq - Hkv) keys (D cancels).
  return num_heads * prefill_score_pairs < 183.0 * (num_heads - num_kv_heads) * decode_keys;
}

int preferred_generation(ComputeCapability cc, int head_size) {
  if (cc < ComputeCapability{8, 0} || !serves_head_size(head_size)) return 0;
  if (cc.major == 9 && kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
    return 3;
  }
  return 2;
}

}  // namespace pagedattn::gpu
