// The rule of generation.h (host code, built with or without CUDA).
#include "backends/gpu/generation.h"

#include <algorithm>

#include "backends/gpu/head_sizes.h"

namespace pagedattn::gpu {

PassKernel pass_kernel(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
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
  // Times over 4 D (D cancels): the prefills' 4 D Hq pairs FLOPs, the decodes' 16-bit K and V, 4 D
  // bytes per key and head read, at the H200's measured TFLOP/s and TB/s (V3Bench GqaPrefill,
  // GqaDecode at block 16): v2 330 and 4.0; v3 600, reading every query head's copy; packed v3 580
  // and 3.6.
  const double hq = num_heads, hkv = num_kv_heads;
  const double v2 = hq * prefill_score_pairs / 330.0 + hkv * decode_keys / 4.0;
  const double v3 = hq * prefill_score_pairs / 600.0 + hq * decode_keys / 4.0;
  const double packed = hq * prefill_score_pairs / 580.0 + hkv * decode_keys / 3.6;
  if (v3 <= packed && v3 <= v2) return PassKernel::kV3;
  return packed < v2 ? PassKernel::kV3Packed : PassKernel::kV2;
}

PassKernel builder_pass_kernel(const BuilderParams& params,
                               std::span<const int32_t> query_start_loc,
                               std::span<const int32_t> seq_lens, bool causal) {
  if (params.deterministic) return PassKernel::kV2;
  return pass_kernel(query_start_loc, seq_lens, params.num_heads, params.num_kv_heads, causal);
}

int preferred_generation(ComputeCapability cc, int head_size) {
  if (cc < ComputeCapability{8, 0} || !serves_head_size(head_size)) return 0;
  if (cc.major == 9 && kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
    return 3;
  }
  return 2;
}

}  // namespace pagedattn::gpu
