// DCP sharding: token ownership, local lengths and the per-rank slot mapping (dcp_sharding.h).
#include <algorithm>
#include <string>

#include "common/mask.h"
#include "pagedattn/dcp_sharding.h"

namespace pagedattn {
namespace {

std::string index_of(std::string_view what, size_t i) {
  return std::string(what) + "[" + std::to_string(i) + "]";
}

Status check_step(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                  size_t num_tokens) {
  if (query_start_loc.size() != seq_lens.size() + 1) {
    return invalid_argument(
        "query_start_loc has " + std::to_string(query_start_loc.size()) +
        " entries; must be num_reqs + 1 = " + std::to_string(seq_lens.size() + 1));
  }
  if (query_start_loc[0] != 0) {
    return invalid_argument("query_start_loc[0] = " + std::to_string(query_start_loc[0]) +
                            " must be 0");
  }
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const int64_t query_len = int64_t{query_start_loc[r + 1]} - query_start_loc[r];
    if (query_len < 0 || query_len > seq_lens[r]) {
      return invalid_argument("request " + std::to_string(r) +
                              ": query_len = " + std::to_string(query_len) + " must be in [0, " +
                              index_of("seq_lens", r) + " = " + std::to_string(seq_lens[r]) + "]");
    }
  }
  if (static_cast<size_t>(query_start_loc.back()) > num_tokens) {
    return invalid_argument("slot_mapping has " + std::to_string(num_tokens) +
                            " entries; must be at least query_start_loc[num_reqs] = " +
                            std::to_string(query_start_loc.back()));
  }
  return ok_status();
}

}  // namespace

Status DcpShard::validate(int block_size) const {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return invalid_argument("dcp_world_size = " + std::to_string(world_size) + " (allowed: 1 to " +
                            std::to_string(kMaxWorldSize) + ")");
  }
  if (rank < 0 || rank >= world_size) {
    return invalid_argument("dcp_rank = " + std::to_string(rank) +
                            " (allowed: [0, dcp_world_size = " + std::to_string(world_size) + "))");
  }
  if (block_size < 1) {
    return invalid_argument("block_size = " + std::to_string(block_size) + " must be at least 1");
  }
  if (interleave < 1 || block_size % interleave != 0) {
    return invalid_argument(
        "cp_kv_cache_interleave_size = " + std::to_string(interleave) +
        " must be at least 1 and divide block_size = " + std::to_string(block_size));
  }
  return ok_status();
}

int dcp_owner_rank(int64_t position, int world_size, int interleave) {
  return static_cast<int>((position / interleave) % world_size);
}

int64_t dcp_local_position(int64_t position, int world_size, int interleave) {
  const int64_t round = int64_t{interleave} * world_size;  // tokens per turn of all ranks
  return position / round * interleave + position % interleave;
}

int64_t dcp_local_length(int64_t length, const DcpShard& shard) {
  return mask::local_keys_below<int64_t>(shard, length);
}

Status dcp_local_seq_lens(std::span<const int32_t> lengths, const DcpShard& shard, int block_size,
                          std::span<int32_t> local_lengths) {
  PAGEDATTN_RETURN_IF_ERROR(shard.validate(block_size));
  if (local_lengths.size() != lengths.size()) {
    return invalid_argument("local_lengths has " + std::to_string(local_lengths.size()) +
                            " entries; must match lengths' " + std::to_string(lengths.size()));
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      return invalid_argument(index_of("lengths", i) + " = " + std::to_string(lengths[i]) +
                              " must be non-negative");
    }
    local_lengths[i] = static_cast<int32_t>(dcp_local_length(lengths[i], shard));
  }
  return ok_status();
}

int32_t dcp_max_local_seq_len(int32_t max_seq_len, const DcpShard& shard) {
  // dcp_local_length never decreases with the length, so the longest request decides.
  return static_cast<int32_t>(dcp_local_length(std::max(max_seq_len, 0), shard));
}

Status dcp_slot_mapping(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                        std::span<const int32_t> local_block_table, int64_t blocks_per_request,
                        int block_size, const DcpShard& shard, std::span<int64_t> slot_mapping) {
  PAGEDATTN_RETURN_IF_ERROR(shard.validate(block_size));
  PAGEDATTN_RETURN_IF_ERROR(check_step(query_start_loc, seq_lens, slot_mapping.size()));
  const size_t num_reqs = seq_lens.size();
  if (blocks_per_request < 0 ||
      local_block_table.size() != num_reqs * static_cast<size_t>(blocks_per_request)) {
    return invalid_argument("local_block_table has " + std::to_string(local_block_table.size()) +
                            " entries; must be num_reqs (" + std::to_string(num_reqs) +
                            ") * blocks_per_request (" + std::to_string(blocks_per_request) + ")");
  }
  std::fill(slot_mapping.begin(), slot_mapping.end(), int64_t{-1});
  for (size_t r = 0; r < num_reqs; ++r) {
    const int64_t context_len =
        int64_t{seq_lens[r]} - (query_start_loc[r + 1] - query_start_loc[r]);
    for (int64_t token = query_start_loc[r]; token < query_start_loc[r + 1]; ++token) {
      const int64_t position = context_len + (token - query_start_loc[r]);
      if (dcp_owner_rank(position, shard.world_size, shard.interleave) != shard.rank) continue;
      const int64_t local = dcp_local_position(position, shard.world_size, shard.interleave);
      const int64_t block_index = local / block_size;
      if (block_index >= blocks_per_request) {
        return out_of_range("request " + std::to_string(r) + ": position " +
                            std::to_string(position) + " is local position " +
                            std::to_string(local) + ", in local block " +
                            std::to_string(block_index) + "; the table has " +
                            std::to_string(blocks_per_request) + " blocks per request");
      }
      const int32_t block = local_block_table[r * blocks_per_request + block_index];
      if (block < 0) {
        return invalid_argument("local_block_table[" + std::to_string(r) + "][" +
                                std::to_string(block_index) + "] = " + std::to_string(block) +
                                " must be a block id >= 0 (request " + std::to_string(r) +
                                " writes position " + std::to_string(position) + " there)");
      }
      slot_mapping[token] = int64_t{block} * block_size + local % block_size;
    }
  }
  return ok_status();
}

}  // namespace pagedattn
