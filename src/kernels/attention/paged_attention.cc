// Host side of the paged attention launcher: which generations and head sizes are built,
// validation of everything the kernels cannot serve (messages name the parameter and the allowed
// values), and the dispatch to the generation's launcher.
#include "kernels/attention/paged_attention.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pagedattn/config.h"

#include "kernels/attention/head_sizes.h"
#include "kernels/operand_checks.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/attention/v2/launch.h"
#endif
#include "kernels/attention/v3/launch.h"

namespace pagedattn::kernels {
namespace {

// The ragged source (k_new/v_new): both or neither, of q_dtype beside a 16-bit cache or none,
// 16-byte rows, and 32-bit strides.
Status validate_ragged_source(const PagedAttentionParams& p) {
  if ((p.k_cache == nullptr) != (p.v_cache == nullptr)) {
    return invalid_argument("paged attention: k_cache and v_cache must be given together");
  }
  if ((p.k_new == nullptr) != (p.v_new == nullptr)) {
    return invalid_argument("paged attention: k_new and v_new must be given together");
  }
  if (p.k_new == nullptr) {
    if ((p.k_cache != nullptr && p.v_cache != nullptr) || p.num_tokens == 0) return ok_status();
    return invalid_argument(
        "paged attention: k_cache and v_cache are required without k_new/v_new");
  }
  if (p.cache_dtype != p.q_dtype) {  // also without a cache: it picks the instantiation
    return invalid_argument(
        "paged attention: k_new/v_new (the ragged source) need a cache of q_dtype or none "
        "(cache_dtype = q_dtype); cache_dtype is " +
        std::string(dtype_name(p.cache_dtype)));
  }
  if (!aligned(p.k_new, 16) || !aligned(p.v_new, 16) || p.new_token_stride % 8 != 0 ||
      p.new_head_stride % 8 != 0 || p.new_token_stride < 0 || p.new_head_stride < 0) {
    return invalid_argument(
        "paged attention: k_new and v_new must be 16-byte aligned with non-negative strides "
        "that are multiples of 8 (token " +
        std::to_string(p.new_token_stride) + ", head " + std::to_string(p.new_head_stride) + ")");
  }
  // The kernels take the strides, and a token's offset inside its row, as 32-bit values.
  const int64_t max_in_row = (p.num_kv_heads - 1) * p.new_head_stride + p.head_size;
  if (p.new_token_stride > INT32_MAX || max_in_row > INT32_MAX) {
    return invalid_argument("paged attention: k_new's token stride " +
                            std::to_string(p.new_token_stride) +
                            " and largest offset inside a token (" + std::to_string(max_in_row) +
                            ") must stay below 2^31 elements");
  }
  return ok_status();
}

// A pass over one rank's keys (decode context parallelism): a valid shard, every query's absolute
// position, and no ragged source (its requests read the cache).
Status validate_key_shard(const PagedAttentionParams& p) {
  const DcpShard& s = p.key_shard;
  if (s.world_size == 1 && s.rank == 0 && p.query_pos0 == nullptr) return ok_status();
  if (s.world_size < 2 || s.rank < 0 || s.rank >= s.world_size || s.interleave < 1) {
    return invalid_argument("paged attention: key_shard (world_size " +
                            std::to_string(s.world_size) + ", rank " + std::to_string(s.rank) +
                            ", interleave " + std::to_string(s.interleave) +
                            ") must have world_size >= 2, 0 <= rank < world_size and "
                            "interleave >= 1, with query_pos0; or world_size 1 without it");
  }
  if (p.query_pos0 == nullptr || p.k_new != nullptr) {
    return invalid_argument(
        "paged attention: a key_shard needs query_pos0 (the queries' absolute positions) and "
        "no ragged source (k_new/v_new)");
  }
  return ok_status();
}

Status validate(const PagedAttentionParams& p) {
  PAGEDATTN_RETURN_IF_ERROR(check_layer_fields("paged attention", p, /*reads_e4m3_query=*/true));
  if (p.max_num_splits < 1) {
    return invalid_argument("paged attention: max_num_splits " + std::to_string(p.max_num_splits) +
                            " must be >= 1");
  }
  if (p.max_num_splits > 1 &&
      (p.split_out == nullptr || p.split_lse == nullptr || !aligned(p.split_out, 16))) {
    return invalid_argument(
        "paged attention: max_num_splits > 1 needs split_out (16-byte aligned) and split_lse");
  }
  if (p.max_query_len < 0 || p.num_reqs < 0 || p.num_tokens < 0 || p.num_pass_reqs < 0) {
    return invalid_argument(
        "paged attention: negative max_query_len, num_reqs, num_pass_reqs or num_tokens");
  }
  if (p.pass_requests != nullptr && p.max_num_splits > 1 && p.num_splits_per_req == nullptr) {
    return invalid_argument("paged attention: pass_requests with max_num_splits " +
                            std::to_string(p.max_num_splits) +
                            " needs num_splits_per_req (0 for the requests outside the pass)");
  }
  PAGEDATTN_RETURN_IF_ERROR(check_operand_layout("paged attention", p));
  PAGEDATTN_RETURN_IF_ERROR(validate_ragged_source(p));
  PAGEDATTN_RETURN_IF_ERROR(validate_key_shard(p));
  if (p.num_tokens > 0 &&
      (p.cu_seqlens_q == nullptr || p.seqused_k == nullptr ||
       (p.k_cache != nullptr && p.block_table == nullptr) || p.out == nullptr || p.q == nullptr)) {
    return invalid_argument(
        "paged attention: q, out, cu_seqlens_q, seqused_k and (with a cache) block_table "
        "are required");
  }
  return ok_status();
}

// The one place a generation joins: its launcher, for validated parameters and the instantiated
// head size. A generation this build did not compile has none.
using GenerationLauncher = Status (*)(const PagedAttentionParams&, int kernel_head_size, void*);
GenerationLauncher generation_launcher(KernelGeneration generation) {
  switch (generation) {
#if PAGEDATTN_WITH_CUDA
    case KernelGeneration::kV2: return &detail::launch_paged_attention_v2;
#endif
#if PAGEDATTN_KERNEL_SM90_BUILT
    case KernelGeneration::kV3: return &detail::launch_paged_attention_v3;
#endif
    default: return nullptr;
  }
}

// Only v2 reads the ragged source (v3 would silently read the cache instead).
Status ragged_source_served(const PagedAttentionParams& p) {
  if (p.k_new == nullptr || p.generation == KernelGeneration::kV2) return ok_status();
  return unimplemented("paged attention: kernel generation v" +
                       std::to_string(static_cast<int>(p.generation)) +
                       " has no ragged KV source (k_new/v_new); v2 serves it");
}

// Only v2 masks by a key shard (v3 would cut at local positions).
Status key_shard_served(const PagedAttentionParams& p) {
  if (p.key_shard.world_size == 1 || p.generation == KernelGeneration::kV2) return ok_status();
  return unimplemented("paged attention: kernel generation v" +
                       std::to_string(static_cast<int>(p.generation)) +
                       " has no key shard (decode context parallelism's windowed context pass); "
                       "v2 serves it");
}

// Only the v3 FP8 kernel reads an e4m3 query (the others would read its bytes as 16-bit values).
Status e4m3_query_served(const PagedAttentionParams& p) {
  if (p.q_dtype != DType::kFP8E4M3 ||
      (p.generation == KernelGeneration::kV3 && p.fp8_tensor_cores && !p.pack_gqa)) {
    return ok_status();
  }
  return unimplemented(
      "paged attention: an fp8_e4m3 q runs on the FP8 tensor cores alone (kernel generation v3, "
      "fp8_tensor_cores, no GQA packing); dequantize it for v" +
      std::to_string(static_cast<int>(p.generation)) + " (dequantize_fp8_query)");
}

std::string built_generations() {
  std::string names;
  for (KernelGeneration g : {KernelGeneration::kV2, KernelGeneration::kV3}) {
    if (generation_launcher(g) == nullptr) continue;
    names += (names.empty() ? "v" : ", v") + std::to_string(static_cast<int>(g));
  }
  return names.empty() ? "none" : names;
}

}  // namespace

bool paged_attention_generation_built(KernelGeneration generation) {
  return generation_launcher(generation) != nullptr;
}

Status paged_attention_serves(const PagedAttentionParams& params) {
  if (!paged_attention_generation_built(params.generation)) {
    return unimplemented("paged attention: kernel generation v" +
                         std::to_string(static_cast<int>(params.generation)) +
                         " is not built (built: " + built_generations() + ")");
  }
  PAGEDATTN_RETURN_IF_ERROR(ragged_source_served(params));
  PAGEDATTN_RETURN_IF_ERROR(key_shard_served(params));
  PAGEDATTN_RETURN_IF_ERROR(e4m3_query_served(params));
#if PAGEDATTN_KERNEL_SM90_BUILT
  if (params.generation == KernelGeneration::kV3) return detail::paged_attention_v3_serves(params);
#endif
  return ok_status();
}

bool paged_attention_head_size_built(int head_size) {
  for (int n : BuiltHeadSizes::kValues) {
    if (n != 0 && n == head_size) return true;
  }
  return false;
}

int paged_attention_kernel_head_size(int head_size) {
  if (head_size < 8 || head_size % 8 != 0) return 0;
  int best = 0;
  for (int n : BuiltHeadSizes::kValues) {
    if (n >= head_size && (best == 0 || n < best)) best = n;
  }
  return best;
}

size_t paged_attention_fp8_workspace_bytes(const PagedAttentionParams& p) {
  if (p.num_reqs <= 0 || p.max_seq_len <= 0 || p.num_kv_heads <= 0 ||
      p.head_size <= 0) {
    return 0;
  }
  // Panels of 128 keys x head_size bytes, one per 128 keys (v3's FP8 tiles hold 128 keys or 64).
  const size_t keys = static_cast<size_t>(p.max_seq_len);
  const size_t panels = (keys + 127) / 128;
  return static_cast<size_t>(p.num_reqs) * panels * static_cast<size_t>(p.num_kv_heads) *
         static_cast<size_t>(p.head_size) * 128;
}

Status launch_paged_attention(const PagedAttentionParams& params, void* stream) {
  const GenerationLauncher launch = generation_launcher(params.generation);
  if (launch == nullptr) return paged_attention_serves(params);
  PAGEDATTN_RETURN_IF_ERROR(ragged_source_served(params));
  PAGEDATTN_RETURN_IF_ERROR(key_shard_served(params));
  PAGEDATTN_RETURN_IF_ERROR(e4m3_query_served(params));
  const int kernel_head_size = paged_attention_kernel_head_size(params.head_size);
  if (kernel_head_size == 0) {
    return unimplemented("paged attention: head_size " + std::to_string(params.head_size) +
                         " is not served by this build (multiples of 8 up to the largest of: " +
                         PAGEDATTN_HEAD_SIZES + ")");
  }
  if (Status s = validate(params); !s.ok()) return s;
  if (request_slots(params) == 0 || params.num_tokens == 0) return ok_status();
  return launch(params, kernel_head_size, stream);
}

#if !PAGEDATTN_KERNEL_SM90_BUILT
// A build without 90a has no v3 kernel; its test hook says so.
Status detail::launch_paged_attention_v3_few_ctas(const PagedAttentionParams&, int, void*, int) {
  return unimplemented("paged attention: kernel generation v3 is not built");
}
#endif

}  // namespace pagedattn::kernels
