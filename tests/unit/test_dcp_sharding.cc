// DCP sharding against a brute-force walk over the tokens: each token's owner is (t / I) % N and
// each rank packs its own tokens in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "pagedattn/dcp_sharding.h"

namespace pagedattn {
namespace {

struct Geometry {
  int world_size;
  int interleave;
  int block_size;
};

std::vector<Geometry> geometries() {
  std::vector<Geometry> all;
  for (int n : {1, 2, 3, 4, 8}) {
    for (int block_size : {1, 4, 16, 64}) {
      for (int interleave : {1, 2, 4, 16, 64}) {
        if (interleave <= block_size && block_size % interleave == 0) {
          all.push_back({n, interleave, block_size});
        }
      }
    }
  }
  return all;
}

// For every rank, the global positions it stores, in order (its local position = the index).
std::vector<std::vector<int64_t>> brute_force_tokens(int64_t length, const Geometry& g) {
  std::vector<std::vector<int64_t>> tokens(g.world_size);
  for (int64_t t = 0; t < length; ++t) tokens[(t / g.interleave) % g.world_size].push_back(t);
  return tokens;
}

TEST(DcpSharding, OwnerLocalPositionAndLengthMatchBruteForce) {
  for (const Geometry& g : geometries()) {
    const int64_t length = 3 * g.block_size * g.world_size + 7;
    const auto tokens = brute_force_tokens(length, g);
    for (int rank = 0; rank < g.world_size; ++rank) {
      const DcpShard shard{g.world_size, rank, g.interleave};
      for (size_t local = 0; local < tokens[rank].size(); ++local) {
        const int64_t t = tokens[rank][local];
        ASSERT_EQ(dcp_owner_rank(t, g.world_size, g.interleave), rank);
        ASSERT_EQ(dcp_local_position(t, g.world_size, g.interleave), static_cast<int64_t>(local));
      }
      for (int64_t prefix = 0; prefix <= length; ++prefix) {
        const auto stored = std::count_if(tokens[rank].begin(), tokens[rank].end(),
                                          [&](int64_t t) { return t < prefix; });
        ASSERT_EQ(dcp_local_length(prefix, shard), stored)
            << "N " << g.world_size << " I " << g.interleave << " rank " << rank << " length "
            << prefix;
      }
    }
  }
}

TEST(DcpSharding, LocalSeqLensAndHostMax) {
  std::mt19937 rng(36);
  for (const Geometry& g : geometries()) {
    std::vector<int32_t> lengths(9);
    for (auto& l : lengths) l = std::uniform_int_distribution<int32_t>(0, 500)(rng);
    const int32_t max_seq_len = *std::max_element(lengths.begin(), lengths.end());
    int64_t total = 0;
    for (int rank = 0; rank < g.world_size; ++rank) {
      const DcpShard shard{g.world_size, rank, g.interleave};
      std::vector<int32_t> local(lengths.size());
      ASSERT_TRUE(dcp_local_seq_lens(lengths, shard, g.block_size, local).ok());
      for (size_t i = 0; i < lengths.size(); ++i) {
        ASSERT_EQ(local[i], static_cast<int64_t>(brute_force_tokens(lengths[i], g)[rank].size()));
        total += local[i];
      }
      EXPECT_EQ(dcp_max_local_seq_len(max_seq_len, shard),
                *std::max_element(local.begin(), local.end()));
      EXPECT_GE(dcp_max_local_seq_len(max_seq_len + 13, shard),  // an upper bound stays one
                *std::max_element(local.begin(), local.end()));
    }
    int64_t expected_total = 0;
    for (int32_t l : lengths) expected_total += l;
    EXPECT_EQ(total, expected_total) << "every token is stored exactly once";
  }
}

// A step of random requests; each rank's block table gives distinct block ids.
TEST(DcpSharding, SlotMappingPutsEachNewTokenOnItsOwnerOnly) {
  std::mt19937 rng(7);
  for (const Geometry& g : geometries()) {
    const int num_reqs = 5;
    std::vector<int32_t> seq_lens(num_reqs);
    std::vector<int32_t> query_start_loc{0};
    for (int r = 0; r < num_reqs; ++r) {
      seq_lens[r] = std::uniform_int_distribution<int32_t>(1, 300)(rng);
      const int32_t query_len = std::uniform_int_distribution<int32_t>(0, std::min(seq_lens[r], 40))(rng);
      query_start_loc.push_back(query_start_loc.back() + query_len);
    }
    const int64_t num_tokens = query_start_loc.back() + 3;  // 3 padding tokens
    const int64_t blocks_per_request = 300 / g.block_size + 2;
    std::vector<int> writers(num_tokens, 0);
    for (int rank = 0; rank < g.world_size; ++rank) {
      const DcpShard shard{g.world_size, rank, g.interleave};
      std::vector<int32_t> table(num_reqs * blocks_per_request);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(1000 + 3 * i + rank);
      std::vector<int64_t> slots(num_tokens, 12345);
      const Status status = dcp_slot_mapping(query_start_loc, seq_lens, table, blocks_per_request,
                                             g.block_size, shard, slots);
      ASSERT_TRUE(status.ok()) << status.to_string();
      for (int r = 0; r < num_reqs; ++r) {
        const auto mine = brute_force_tokens(seq_lens[r], g)[rank];
        const int32_t query_len = query_start_loc[r + 1] - query_start_loc[r];
        for (int32_t i = 0; i < query_len; ++i) {
          const int64_t position = seq_lens[r] - query_len + i;
          const int64_t token = query_start_loc[r] + i;
          const auto found = std::find(mine.begin(), mine.end(), position);
          if (found == mine.end()) {
            ASSERT_EQ(slots[token], -1);
            continue;
          }
          const int64_t local = found - mine.begin();
          ASSERT_EQ(slots[token],
                    int64_t{table[r * blocks_per_request + local / g.block_size]} * g.block_size +
                        local % g.block_size);
          ++writers[token];
        }
      }
      for (int64_t t = query_start_loc.back(); t < num_tokens; ++t) ASSERT_EQ(slots[t], -1);
    }
    for (int64_t t = 0; t < query_start_loc.back(); ++t) {
      ASSERT_EQ(writers[t], 1) << "every new token is written by exactly one rank";
    }
  }
}

TEST(DcpSharding, RefusesBadShardsAndSteps) {
  EXPECT_EQ((DcpShard{0, 0, 1}).validate(16).message(), "dcp_world_size = 0 (allowed: 1 to 1024)");
  EXPECT_EQ((DcpShard{1025, 0, 1}).validate(16).message(),
            "dcp_world_size = 1025 (allowed: 1 to 1024)");
  EXPECT_EQ((DcpShard{4, 4, 1}).validate(16).message(),
            "dcp_rank = 4 (allowed: [0, dcp_world_size = 4))");
  EXPECT_EQ((DcpShard{4, 1, 3}).validate(16).message(),
            "cp_kv_cache_interleave_size = 3 must be at least 1 and divide block_size = 16");
  EXPECT_FALSE((DcpShard{4, 1, 0}).validate(16).ok());
  EXPECT_FALSE((DcpShard{4, 1, 32}).validate(16).ok());
  EXPECT_TRUE((DcpShard{4, 3, 16}).validate(16).ok());

  const DcpShard shard{2, 0, 1};
  std::vector<int32_t> local(2);
  const std::vector<int32_t> negative{5, -1};
  EXPECT_EQ(dcp_local_seq_lens(negative, shard, 16, local).message(),
            "lengths[1] = -1 must be non-negative");
  std::vector<int32_t> short_out(1);
  EXPECT_FALSE(dcp_local_seq_lens(std::vector<int32_t>{1, 2}, shard, 16, short_out).ok());

  const std::vector<int32_t> seq_lens{40};
  const std::vector<int32_t> qsl{0, 4};
  std::vector<int64_t> slots(4);
  const std::vector<int32_t> one_block{7};  // positions 36..39 are local 18, 19: block 1
  EXPECT_EQ(dcp_slot_mapping(qsl, seq_lens, one_block, 1, 16, shard, slots).code(),
            StatusCode::kOutOfRange);
  const std::vector<int32_t> negative_block{7, -1};
  EXPECT_NE(dcp_slot_mapping(qsl, seq_lens, negative_block, 2, 16, shard, slots)
                .message()
                .find("local_block_table[0][1] = -1"),
            std::string::npos);
  const std::vector<int32_t> table{7, 8};
  EXPECT_FALSE(dcp_slot_mapping(std::vector<int32_t>{0, 50}, seq_lens, table, 2, 16, shard, slots).ok());
  EXPECT_FALSE(dcp_slot_mapping(std::vector<int32_t>{1, 4}, seq_lens, table, 2, 16, shard, slots).ok());
  std::vector<int64_t> too_few(3);
  EXPECT_FALSE(dcp_slot_mapping(qsl, seq_lens, table, 2, 16, shard, too_few).ok());
  EXPECT_FALSE(dcp_slot_mapping(qsl, seq_lens, table, 3, 16, shard, slots).ok());
  EXPECT_TRUE(dcp_slot_mapping(qsl, seq_lens, table, 2, 16, shard, slots).ok());
}

}  // namespace
}  // namespace pagedattn
