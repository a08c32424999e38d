// Host-side interface of the paged varlen attention kernel family. Host-only header: no CUDA types.
// launch_paged_attention is the one dispatch point: it picks the kernel generation from the
// parameters, and each generation's launcher is the only place where runtime values (head size,
// dtypes) become template parameters.
#pragma once

#include <cstdint>

#include "kernels/paged_operands.h"
#include "pagedattn/dcp_sharding.h"
#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::kernels {

// Kernel generations, numbered like FlashAttention's: v2 = mma.sync tensor cores (sm_80+, in
// attention/v2/), v3 = Hopper wgmma (sm_90a). A generation that this build did not compile is
// rejected by launch_paged_attention.
enum class KernelGeneration { kV2 = 2, kV3 = 3 };

// The shared operands and the varlen family's own: FP8 tensor cores, the step's lengths, the
// mask's right side and causality, the kernel generation, split-KV and the ragged source.
struct PagedAttentionParams : PagedOperands {
  // e4m3 caches on the FP8 tensor cores (generation v3, FlashAttention-3's FP8 path): Q and P are
  // rounded to e4m3 too, about 3e-2 relative error against 2e-3 for v2's path, which converts the
  // cache to 16 bits; opt-in, so that no backend trades accuracy for it unasked.
  bool fp8_tensor_cores = false;
  // Device memory of paged_attention_fp8_workspace_bytes(params) bytes, 16-byte aligned, for the
  // FP8 tensor-core kernel: it writes each request's V there transposed, once per launch, and
  // every query tile's CTA copies it from there (no transpose in the kernel).
  void* fp8_workspace = nullptr;
  size_t fp8_workspace_bytes = 0;
  // An e4m3 query (q_dtype fp8_e4m3, vLLM's FA3 FP8 path): the FP8 tensor-core kernel reads it as
  // it is, Q = q times q_descale[req * q_descale_req_stride + kv_head * q_descale_head_stride]
  // (nullptr: 1; strides 0: one scale), and writes a bf16 output. No other kernel reads e4m3 Q.
  const float* q_descale = nullptr;
  int64_t q_descale_req_stride = 0;
  int64_t q_descale_head_stride = 0;

  const int32_t* cu_seqlens_q = nullptr;  // [num_reqs + 1] device
  const int32_t* seqused_k = nullptr;     // [num_reqs] device: keys per request
  int num_reqs = 0;  // rows of cu_seqlens_q (+ 1), seqused_k, block_table, num_splits_per_req
  // The requests this launch serves when not all of them (FLASH_ATTN's prefill rows beside the
  // decode kernel's decode rows, in any order): grid slot i serves request pass_requests[i], -1 an
  // empty slot, for i < num_pass_reqs (device). nullptr: slot i serves request i < num_reqs. With
  // splits, num_splits_per_req is required and 0 for the requests no slot names (their rows are
  // another launch's: the split combine leaves them alone).
  const int32_t* pass_requests = nullptr;
  int num_pass_reqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;  // upper bound, decides the grid (graph capture passes the padded max)
  int max_seq_len = 0;    // upper bound

  int window_right = -1;  // keys .. pos + window_right (-1: unbounded; causal caps it at 0)
  bool causal = true;
  // Decode context parallelism's context pass under a window (docs/dcp.md): each request's keys are
  // key_shard's rank's share of its context, and its query row i sits at absolute position
  // query_pos0[r] + i ([num_reqs] device), so that the window cuts where it does in the whole
  // sequence. world_size 1: the keys are the request's own, row i at seqused_k - q_len + i. v2
  // only.
  DcpShard key_shard;
  const int32_t* query_pos0 = nullptr;
  KernelGeneration generation = KernelGeneration::kV2;  // paged_attention_serves says where v3 can
  // v3: GQA packing. A work tile holds the query heads of one KV head (rows (position, head in the
  // group), kBlockM / group positions), so each KV head's K/V is read once per query tile, not once
  // per query head; decode-shaped launches (max_query_len x group <= 16) are served only with it.
  // bf16 cache, no soft cap or ALiBi, group <= the query tile's rows. The backends set it per pass
  // (gpu::pass_kernel); v2 packs its decode tiles itself.
  bool pack_gqa = false;

  // Split-KV (decided ahead of time by the builder). num_splits_per_req [num_reqs] device (nullptr
  // = every request uses max_num_splits); splits of one request cover its KV blocks evenly. With
  // max_num_splits > 1 the kernel writes partials to split_out [max_num_splits, num_tokens,
  // num_heads, head_size] f32 and split_lse [max_num_splits, num_heads, num_tokens] f32, then a
  // combine kernel merges them into out/lse with merge_attn_states' math.
  int max_num_splits = 1;
  const int32_t* num_splits_per_req = nullptr;
  float* split_out = nullptr;
  float* split_lse = nullptr;

  // Ragged KV source (FlashInfer's prefill over contiguous K/V): the new tokens' keys and values,
  // [num_tokens, num_kv_heads, head_size] of q_dtype, K and V with the same strides (elements). A
  // request with no context (seqused_k == its query length) reads key j from new token
  // cu_seqlens_q[r] + j instead of the cache. nullptr: every request reads the cache. Needs a
  // 16-bit cache of q_dtype, or none (k_cache nullptr: then no request may have context; such a
  // request's rows are left unwritten). v2 only.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t new_token_stride = 0;
  int64_t new_head_stride = 0;
};

// The grid's request slots: num_pass_reqs with pass_requests, else num_reqs.
inline int request_slots(const PagedAttentionParams& p) {
  return p.pass_requests != nullptr ? p.num_pass_reqs : p.num_reqs;
}

// Whether this build compiled the generation's kernels.
bool paged_attention_generation_built(KernelGeneration generation);

// OK when params.generation serves this launch (built, and for v3 the head size, dtypes, features,
// block size, split count and strides it has kernels for, on a 9.0 device); else the Status that
// launch_paged_attention would return. Backends ask before launching to fall back to v2.
Status paged_attention_serves(const PagedAttentionParams& params);

// Head sizes compiled into this build (others are served by the next larger one, or rejected).
bool paged_attention_head_size_built(int head_size);
int paged_attention_kernel_head_size(
    int head_size);  // the instantiated size that serves head_size; 0 = none

// The bytes of PagedAttentionParams::fp8_workspace a launch of these params with fp8_tensor_cores
// needs: num_reqs x num_kv_heads x head_size x 128 x ceil(max_seq_len / 128), V's bytes of the
// longest request per request (0 for an empty batch).
size_t paged_attention_fp8_workspace_bytes(const PagedAttentionParams& params);

// Validates what the kernel cannot serve, then launches (stream: cudaStream_t).
Status launch_paged_attention(const PagedAttentionParams& params, void* stream);

}  // namespace pagedattn::kernels
