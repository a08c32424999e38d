// Host side of the paged attention launcher: which generations and head sizes are built,
// validation of everything the kernels cannot serve (messages name the parameter and the allowed
// values), and the dispatch to the generation's launcher.
#include "kernels/attention/paged_attention.h"

#include <cstdint>
#include <string>

#include "pagedattn/config.h"

#include "kernels/attention/head_sizes.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/attention/v2/launch.h"
#endif
#if PAGEDATTN_KERNEL_SM90_BUILT
#include "kernels/attention/v3/launch.h"
#endif

namespace pagedattn::kernels {
namespace {

bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

std::string str(int64_t v) { return std::to_string(v); }

Status validate(const PagedAttentionParams& p) {
  if (p.q_dtype != DType::kF16 && p.q_dtype != DType::kBF16) {
    return invalid_argument("paged attention: q_dtype " + std::string(dtype_name(p.q_dtype)) +
                            " is not supported (allowed: f16, bf16; f32 runs on the CPU backend)");
  }
  const bool fp8 = p.cache_dtype == DType::kFP8E4M3 || p.cache_dtype == DType::kFP8E5M2;
  if (!fp8 && p.cache_dtype != p.q_dtype) {
    return invalid_argument("paged attention: cache_dtype " +
                            std::string(dtype_name(p.cache_dtype)) + " must equal q_dtype " +
                            std::string(dtype_name(p.q_dtype)) + " or be fp8_e4m3/fp8_e5m2");
  }
  if (fp8 && (p.k_scale == nullptr || p.v_scale == nullptr)) {
    return invalid_argument("paged attention: an FP8 cache needs k_scale and v_scale");
  }
  if (p.num_kv_heads <= 0 || p.num_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return invalid_argument("paged attention: num_heads " + str(p.num_heads) +
                            " must be a positive multiple of num_kv_heads " + str(p.num_kv_heads));
  }
  if (p.block_size <= 0 || p.block_size % 16 != 0) {
    return invalid_argument("paged attention: block_size " + str(p.block_size) +
                            " must be a positive multiple of 16");
  }
  if (p.max_num_splits < 1) {
    return invalid_argument("paged attention: max_num_splits " + str(p.max_num_splits) +
                            " must be >= 1");
  }
  if (p.max_num_splits > 1 && (p.split_out == nullptr || p.split_lse == nullptr ||
                               !aligned(p.split_out, 16))) {
    return invalid_argument(
        "paged attention: max_num_splits > 1 needs split_out (16-byte aligned) and split_lse");
  }
  if (p.max_query_len < 0 || p.num_reqs < 0 || p.num_tokens < 0) {
    return invalid_argument("paged attention: negative max_query_len, num_reqs or num_tokens");
  }
  // 16-byte cp.async of Q and of 16-bit K/V rows; 8-byte stores of out; 8-byte FP8 rows.
  const int64_t cache_strides[] = {p.cache_block_stride, p.cache_kv_stride, p.cache_token_stride,
                                   p.cache_head_stride};
  bool cache_ok = aligned(p.kv_cache, fp8 ? 8 : 16);
  for (int64_t s : cache_strides) cache_ok = cache_ok && s % 8 == 0;
  if (!cache_ok) {
    return invalid_argument(
        "paged attention: kv_cache must be 16-byte aligned (8 for FP8) with strides that are "
        "multiples of 8 elements");
  }
  // The kernel addresses a block's rows with 32-bit offsets (only block * stride is 64-bit).
  const int64_t max_in_block = (p.block_size - 1) * p.cache_token_stride +
                               (p.num_kv_heads - 1) * p.cache_head_stride + p.cache_kv_stride +
                               p.head_size;
  for (int64_t s : cache_strides) cache_ok = cache_ok && s >= 0 && s <= INT32_MAX;
  if (!cache_ok || max_in_block > INT32_MAX) {
    return invalid_argument("paged attention: kv_cache strides (block " +
                            str(p.cache_block_stride) + ", kv " + str(p.cache_kv_stride) +
                            ", token " + str(p.cache_token_stride) + ", head " +
                            str(p.cache_head_stride) +
                            ") must be non-negative and below 2^31 elements, as must the largest "
                            "offset inside a block (" + str(max_in_block) + ")");
  }
  if (!aligned(p.q, 16) || p.q_token_stride % 8 != 0 || p.q_head_stride % 8 != 0) {
    return invalid_argument(
        "paged attention: q must be 16-byte aligned with strides that are multiples of 8");
  }
  if (!aligned(p.out, 8) || p.out_token_stride % 4 != 0 || p.out_head_stride % 4 != 0) {
    return invalid_argument(
        "paged attention: out must be 8-byte aligned with strides that are multiples of 4");
  }
  if (p.num_tokens > 0 && (p.cu_seqlens_q == nullptr || p.seqused_k == nullptr ||
                           p.block_table == nullptr || p.out == nullptr || p.q == nullptr)) {
    return invalid_argument("paged attention: q, out, cu_seqlens_q, seqused_k and block_table "
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

std::string built_generations() {
  std::string names;
  for (KernelGeneration g : {KernelGeneration::kV2, KernelGeneration::kV3}) {
    if (generation_launcher(g) == nullptr) continue;
    names += (names.empty() ? "v" : ", v") + str(static_cast<int>(g));
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
                         str(static_cast<int>(params.generation)) +
                         " is not built (built: " + built_generations() + ")");
  }
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

Status launch_paged_attention(const PagedAttentionParams& params, void* stream) {
  const GenerationLauncher launch = generation_launcher(params.generation);
  if (launch == nullptr) return paged_attention_serves(params);
  const int kernel_head_size = paged_attention_kernel_head_size(params.head_size);
  if (kernel_head_size == 0) {
    return unimplemented("paged attention: head_size " + str(params.head_size) +
                         " is not served by this build (multiples of 8 up to the largest of: " +
                         PAGEDATTN_HEAD_SIZES + ")");
  }
  if (Status s = validate(params); !s.ok()) return s;
  if (params.num_reqs == 0 || params.num_tokens == 0) return ok_status();
  return launch(params, kernel_head_size, stream);
}

}  // namespace pagedattn::kernels
