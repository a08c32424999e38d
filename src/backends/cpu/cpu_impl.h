// CPU_ATTN's impl, split by job: parameter checks (impl.cc), the cache write (cache_update.cc) and
// forward (forward.cc, cascade.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/cpu_metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::cpu {

// The element type of the cache for these parameters (fp8 caches also accept u8 storage).
DType cache_storage_dtype(const AttentionImplParams& params);

// A host [>= min_tokens, heads, dim] tensor of `dtype` with unit stride along dim.
Status check_rows(const TensorView& t, std::string_view what, DType dtype, int64_t min_tokens,
                  int heads, int dim);

// Checks FP8 scales: undefined, or float32 [1] / [num_kv_heads] on the host, finite and > 0.
Status check_scales(const KVScales& scales, int num_kv_heads);

Status write_kv_cache(const AttentionImplParams& params, const TensorView& key,
                      const TensorView& value, const KVCacheView& kv_cache,
                      const TensorView& slot_mapping, const KVScales& scales);

Status run_forward(const AttentionImplParams& params, const TensorView& query,
                   const TensorView& key, const TensorView& value, const KVCacheView& kv_cache,
                   const CpuAttentionMetadata& md, const TensorView& output,
                   const TensorView& output_lse, const KVScales& scales);

// Zero output and -inf LSE for the tokens from first_token on (CUDA-graph padding past the batch).
void write_padding_rows(const AttentionPass& pass, int64_t first_token, const TensorView& output);

// Decode context parallelism (dcp_forward.cc): `plain` is the pass plain attention would run over
// this rank's cache, `ready` whether the call passed its checks here. Every rank of p.dcp_group
// calls it; a refusal on any rank fails the step on all of them.
Status run_dcp_forward(const Status& ready, const AttentionPass& plain,
                       const AttentionImplParams& p, const CpuAttentionMetadata& md,
                       const TensorView& query, const TensorView& key, const TensorView& value,
                       const TensorView& output, const TensorView& output_lse,
                       const KVScales& scales);

// Cascade: prefix pass + suffix pass + merge_attn_states into output / output_lse. `plain` is the
// pass plain attention would run (its query, output and KV fields are reused).
Status run_cascade(const AttentionPass& plain, const CpuAttentionMetadata& md,
                   const TensorView& output, const TensorView& output_lse);

}  // namespace pagedattn::cpu
