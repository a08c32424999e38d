// Split-KV planning for the paged attention kernel: how many KV splits each request gets, decided
// on the host by the metadata builder, and the workspace the split partials need. Pure functions,
// no CUDA: the same code sizes the workspace and fills the schedule, and it is unit-tested on the
// host.
//
// Why split at all: one CTA serves (request, KV head, query tile). A decode step of a few requests
// launches only num_reqs * Hkv CTAs, far fewer than the SMs, so each CTA walks a long KV range
// alone. Splitting a request's KV blocks into s ranges multiplies its CTAs by s; the partial
// results (output and LSE per range) are merged afterwards with merge_attn_states' math.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagedattn/status.h"

namespace pagedattn::plan {

// Requests with at most this many query tokens may be split: decode and short multi-token queries
// such as speculative verification (FlashAttention-2 splits only q_len == 1). Longer queries
// already bring query tiles of their own.
inline constexpr int kMaxSplitQueryLen = 16;
// A split covers at least this many keys, so that its fixed cost (Q load, partial write, merge)
// stays small next to the KV it reads: 256 keys of head size 128 in bf16 are 128 KiB of K and V.
inline constexpr int kMinKeysPerSplit = 256;
// Upper bound on splits per request (vLLM's flash_attn_max_num_splits_for_cuda_graph default).
inline constexpr int kMaxSplits = 32;
// Enough CTAs without splitting: at least this fraction of one wave (FlashAttention-2's 0.8).
inline constexpr double kEnoughWaveFraction = 0.8;
// Among the split counts, take the smallest whose wave efficiency is within this factor of the best
// (FlashAttention-2's 0.85): more splits cost partial writes and merging for little gain.
inline constexpr double kEfficiencyTolerance = 0.85;
// Splits are chosen so the work fits in at most this many waves of one CTA per SM.
inline constexpr int kMaxWaves = 2;
// The split workspace (f32 partial outputs) is capped at this many bytes per builder.
inline constexpr int64_t kMaxWorkspaceBytes = int64_t{256} << 20;

struct SplitKVConfig {
  int num_sms = 132;   // multiprocessors of the device (H200: 132)
  int num_heads = 32;  // query heads
  int num_kv_heads = 8;
  int head_size = 128;          // the kernel's (instantiated) head size: decides its tiles
  int block_size = 16;          // tokens per KV block
  int max_splits = kMaxSplits;  // bound for this step (workspace, graph safety); >= 1
  // Sliding window: keys before a query it sees (-1 = all). A windowed request reads at most
  // window_left + query_len keys, however long its sequence; the schedule splits those.
  int window_left = -1;
  // Also split requests with more than kMaxSplitQueryLen query tokens (the cascade prefix pass,
  // where all tokens form one request over the shared prefix).
  bool split_long_queries = false;
};

struct SplitSchedule {
  std::vector<int32_t> num_splits_per_req;  // [num_reqs], each in [1, max_splits]
  int max_splits_used = 1;                  // max over num_splits_per_req
  int64_t num_ctas_unsplit = 0;             // sum over requests of Hkv * query tiles
};

// KV blocks a split covers at least: ceil(kMinKeysPerSplit / block_size), at least 1.
int min_blocks_per_split(int block_size);

// CTAs one request occupies without splitting, as the kernel tiles it (kernels/attention/v2/
// tile_geometry.h): Hkv x output-column chunks x row tiles of its query_len * (Hq / Hkv) packed
// rows.
int64_t request_ctas(int query_len, int num_heads, int num_kv_heads, int head_size);

// The global split count for `splittable_ctas` CTAs that may split and `fixed_ctas` that may not,
// where the longest splittable request has `max_kv_blocks` blocks: 1 when there are already enough
// CTAs, else the smallest count within kEfficiencyTolerance of the best wave efficiency.
int choose_num_splits(int64_t splittable_ctas, int64_t fixed_ctas, int max_kv_blocks,
                      int min_blocks_per_split, int num_sms, int max_splits);

// The per-request schedule. query_start_loc [num_reqs + 1], seq_lens [num_reqs] (host copies).
// Errors name the field when lengths are inconsistent.
StatusOr<SplitSchedule> plan_split_kv(std::span<const int32_t> query_start_loc,
                                      std::span<const int32_t> seq_lens,
                                      const SplitKVConfig& config);

// f32 workspace for split partials: out [splits, tokens, Hq, D] and lse [splits, Hq, tokens].
// `token_splits` bounds splits * tokens for one launch.
struct SplitWorkspaceLayout {
  int64_t token_splits = 0;
  int64_t out_floats = 0;  // token_splits * Hq * D
  int64_t lse_floats = 0;  // token_splits * Hq
};
SplitWorkspaceLayout split_workspace_layout(int max_num_tokens, int num_heads, int head_size);

// The split bound a step of `num_tokens` query tokens launches with. It depends on num_tokens and
// the builder's constants only, never on lengths, so a CUDA graph captured for this token count
// stays valid for any batch of the same count: no split count plan_split_kv can choose for such a
// batch exceeds it. 1 when num_tokens tokens already fill the SMs (the heuristic cannot split
// then).
int graph_safe_max_splits(int64_t num_tokens, int64_t token_splits, int num_heads, int num_kv_heads,
                          int head_size, int num_sms);

}  // namespace pagedattn::plan
