// The CPU attention kernel: one "pass" of paged attention over a batch (plain attention, or the
// prefix or suffix pass of cascade), online softmax in float32, blocked over keys, run on the
// thread pool over (request, KV head, chunk of query rows).
#pragma once

#include <cstdint>
#include <vector>

#include "pagedattn/dcp_sharding.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu {

// Where keys and values live. Element d of key j (plane K or V) of KV head h is at
//   base + block * block_stride + (j % block_size) * token_stride + h * head_stride + d
// with block = blocks[j / block_size] of the request (paged), or at
//   base + (token_base + j) * token_stride + h * head_stride + d
// when the request has no block list (encoder attention reading the new tokens directly).
struct KvSource {
  const void* k_base = nullptr;
  const void* v_base = nullptr;
  DType dtype = DType::kBF16;  // f32, f16, bf16, fp8_e4m3, fp8_e5m2
  int64_t block_stride = 0;    // elements
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  int block_size = 1;
  // FP8 dequantization scales (values = stored * scale[h * stride]): nullptr = 1; stride 0 = per
  // tensor.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t k_scale_stride = 0;
  int64_t v_scale_stride = 0;
};

// One request's share of a pass.
struct RequestPass {
  int64_t q_start = 0;              // first query token (row of query/output)
  int q_len = 0;                    // query tokens
  int query_pos0 = 0;               // absolute position of the first query token
  const int32_t* blocks = nullptr;  // block ids of the pass's keys (nullptr = contiguous tokens)
  int64_t token_base = 0;           // contiguous source: row of key 0
  int kv_len = 0;                   // keys in this pass
  int key_pos0 = 0;                 // absolute position of the pass's key 0
};

struct AttentionPass {
  // query [T, Hq, D] with unit stride along D.
  const void* query = nullptr;
  DType query_dtype = DType::kBF16;
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;
  // output [T, Hq, D] (unit stride along D), written for every token of every request.
  void* output = nullptr;
  DType output_dtype = DType::kBF16;
  int64_t o_token_stride = 0;
  int64_t o_head_stride = 0;
  // lse [Hq, T] float32 natural log, optional.
  float* lse = nullptr;
  int64_t lse_head_stride = 0;
  int64_t lse_token_stride = 0;

  KvSource kv;
  std::vector<RequestPass> requests;

  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  float scale = 1.0f;
  float soft_cap = 0.0f;                // <= 0: none
  const float* alibi_slopes = nullptr;  // [Hq] or nullptr
  const float* sinks = nullptr;         // [Hq] or nullptr
  SlidingWindow window;
  bool causal = true;
  // Whose keys the requests' kv_len count (mask.h): a DCP rank's share of each sequence, the
  // queries keeping their absolute positions. world_size 1: the sequence's own keys.
  DcpShard key_shard;
};

// Runs the pass on the shared thread pool. Inputs are assumed valid (the impl checks them).
void run_attention_pass(const AttentionPass& pass);

}  // namespace pagedattn::cpu
