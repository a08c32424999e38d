// Decode context parallelism (DCP): which rank stores which tokens of every sequence (vLLM's rule,
// docs/dcp.md). With N ranks and interleave I, token t lives on rank (t / I) % N: runs of I
// consecutive tokens go round-robin over the ranks. Each rank's cache holds only its own tokens,
// packed in order: its local position of t is (t / (I * N)) * I + t % I.
#pragma once

#include <cstdint>
#include <span>

#include "pagedattn/status.h"

namespace pagedattn {

struct DcpShard {
  int world_size = 1;  // N, vLLM's decode_context_parallel_size
  int rank = 0;        // this rank, in [0, N)
  int interleave = 1;  // I, vLLM's cp_kv_cache_interleave_size

  // Far above any tensor-parallel group; keeps I * N and the local positions inside int64.
  static constexpr int kMaxWorldSize = 1024;

  // N in [1, kMaxWorldSize], rank in [0, N), I >= 1 and block_size % I == 0 (a run never
  // straddles two blocks).
  Status validate(int block_size) const;
};

// The rank that stores token `position`, and the token's position in that rank's cache.
int dcp_owner_rank(int64_t position, int world_size, int interleave);
int64_t dcp_local_position(int64_t position, int world_size, int interleave);

// How many of the first `length` tokens of a sequence the shard's rank stores (vLLM's
// get_dcp_local_seq_lens for one length). Non-decreasing in `length`.
int64_t dcp_local_length(int64_t length, const DcpShard& shard);

// dcp_local_length of every entry of `lengths` into `local_lengths` (same size). Refuses an
// invalid shard, a negative length or mismatched sizes.
Status dcp_local_seq_lens(std::span<const int32_t> lengths, const DcpShard& shard, int block_size,
                          std::span<int32_t> local_lengths);

// The longest local length of any request on the shard's rank, from the host's max_seq_len alone
// (no read of device lengths): exact when max_seq_len is, an upper bound when it is one.
int32_t dcp_max_local_seq_len(int32_t max_seq_len, const DcpShard& shard);

// The rank's slot mapping for a step's new tokens: new token i of request r stands at position
// p = seq_len[r] - query_len[r] + i; when the shard's rank stores p, its slot is
// local_block_table[r][lp / block_size] * block_size + lp % block_size with lp its local position,
// else -1. Entries past query_start_loc[num_reqs] (CUDA-graph padding) are -1.
// local_block_table is row-major [num_reqs, blocks_per_request] int32, the rank's own blocks.
Status dcp_slot_mapping(std::span<const int32_t> query_start_loc,
                        std::span<const int32_t> seq_lens,
                        std::span<const int32_t> local_block_table, int64_t blocks_per_request,
                        int block_size, const DcpShard& shard, std::span<int64_t> slot_mapping);

}  // namespace pagedattn
