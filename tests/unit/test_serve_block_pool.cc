// The serve loop's block allocator and KV-cache manager on hand-worked examples: allocation and
// freeing order, reference counts, prefix hits by block hash, eviction of reused blocks, and the
// accounting that counts free cache hits against the free blocks.
#include <gtest/gtest.h>

#include <vector>

#include "serve/block_pool.h"
#include "serve/kv_manager.h"

namespace pagedattn::serve {
namespace {

TEST(ServeBlockPool, AllocatesFromTheHeadAndFreesTailFirst) {
  BlockPool pool(6, /*enable_prefix_caching=*/true);  // block 0 is the null block
  EXPECT_EQ(pool.num_usable(), 5);
  EXPECT_EQ(pool.free_queue(), (std::vector<int>{1, 2, 3, 4, 5}));
  const std::vector<int> a = *pool.allocate(2);
  EXPECT_EQ(a, (std::vector<int>{1, 2}));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.4);
  EXPECT_FALSE(pool.allocate(4).has_value());  // only 3 free: nothing taken
  EXPECT_EQ(pool.num_free(), 3);
  pool.release(a);  // the sequence's last block joins the queue first
  EXPECT_EQ(pool.free_queue(), (std::vector<int>{3, 4, 5, 2, 1}));
  EXPECT_EQ(pool.ref_count(1), 0);
}

TEST(ServeBlockPool, SharedBlocksAreCountedAndFreedWithTheirLastReference) {
  BlockPool pool(4, true);
  const std::vector<int> a = *pool.allocate(1);
  pool.touch(a);  // a second request shares the block
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);  // still held once
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(ServeBlockPool, PrefixHitsStopAtTheFirstMissAndReuseEvicts) {
  BlockPool pool(6, true);
  const BlockHash h1 = 11, h2 = 22, h3 = 33;
  const std::vector<int> a = *pool.allocate(2);  // blocks 1, 2
  pool.cache(1, h1);
  pool.cache(2, h2);
  pool.release(a);  // queue 3 4 5 2 1, hashes kept
  EXPECT_EQ(pool.find_cached(std::vector<BlockHash>{h1, h2, h3}), (std::vector<int>{1, 2}));
  EXPECT_EQ(pool.find_cached(std::vector<BlockHash>{h2}), (std::vector<int>{2}));
  EXPECT_TRUE(pool.find_cached(std::vector<BlockHash>{h3, h1}).empty());
  // Four fresh blocks take 3, 4, 5 and then the least recently freed cached block, 2.
  EXPECT_EQ(*pool.allocate(4), (std::vector<int>{3, 4, 5, 2}));
  EXPECT_FALSE(pool.hash_of(2).has_value());
  EXPECT_EQ(pool.find_cached(std::vector<BlockHash>{h1, h2}), (std::vector<int>{1}));
  // A hit on a free block takes it out of the middle of the queue.
  pool.touch(std::vector<int>{1});
  EXPECT_TRUE(pool.free_queue().empty());
  EXPECT_EQ(pool.ref_count(1), 1);
}

TEST(ServeBlockPool, DuplicateHashKeepsTheFirstBlockAndCachingCanBeOff) {
  BlockPool pool(4, true);
  pool.allocate(2);
  pool.cache(1, 7);
  pool.cache(2, 7);
  EXPECT_EQ(pool.hash_of(1), BlockHash{7});
  EXPECT_FALSE(pool.hash_of(2).has_value());
  BlockPool off(4, false);
  off.allocate(1);
  off.cache(1, 7);
  EXPECT_TRUE(off.find_cached(std::vector<BlockHash>{7}).empty());
}

TEST(ServeBlockPool, HashesChainTheParent) {
  const std::vector<int32_t> x = {1, 2, 3, 4}, y = {1, 2, 3, 5};
  EXPECT_EQ(hash_block(0, x), hash_block(0, x));
  EXPECT_NE(hash_block(0, x), hash_block(0, y));
  EXPECT_NE(hash_block(0, x), hash_block(hash_block(0, y), x));
}

Request make_request(int id, std::vector<int32_t> tokens) {
  Request r;
  r.id = id;
  r.num_prompt_tokens = static_cast<int>(tokens.size());
  r.tokens = std::move(tokens);
  return r;
}

TEST(ServeKVCacheManager, SecondRequestHitsTheFirstsFullBlocksButComputesItsLastToken) {
  BlockPool pool(8, true);
  KVCacheManager kv(pool, 4);
  Request a = make_request(0, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(kv.find_cached_prefix(a).blocks.empty());
  ASSERT_TRUE(kv.allocate_slots(a, 9));
  EXPECT_EQ(a.blocks, (std::vector<int>{1, 2, 3}));
  kv.cache_full_blocks(a, 9);  // blocks 1 and 2 are full
  EXPECT_TRUE(pool.hash_of(2).has_value());
  EXPECT_FALSE(pool.hash_of(3).has_value());

  // Same 8 first tokens: both full blocks hit. Exactly 8 tokens: only the first block may hit,
  // since the step needs a query token.
  Request b = make_request(1, {1, 2, 3, 4, 5, 6, 7, 8, 42});
  const CachedPrefix hit = kv.find_cached_prefix(b);
  EXPECT_EQ(hit.blocks, (std::vector<int>{1, 2}));
  EXPECT_EQ(hit.num_tokens, 8);
  Request c = make_request(2, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(kv.find_cached_prefix(c).num_tokens, 4);

  ASSERT_TRUE(kv.allocate_slots(b, 1, hit));
  EXPECT_EQ(b.blocks, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(pool.ref_count(1), 2);
  kv.free(a);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(kv.prefix_query_tokens(), 9 + 9 + 8);
  EXPECT_EQ(kv.prefix_hit_tokens(), 8 + 4);
}

TEST(ServeKVCacheManager, FreeCacheHitsCountAgainstTheFreeBlocks) {
  BlockPool pool(4, true);  // 3 usable
  KVCacheManager kv(pool, 4);
  Request a = make_request(0, {1, 2, 3, 4, 5});
  ASSERT_TRUE(kv.allocate_slots(a, 5));  // blocks 1, 2
  kv.cache_full_blocks(a, 5);
  kv.free(a);  // all 3 free, block 1 cached
  Request b = make_request(1, {1, 2, 3, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9});
  const CachedPrefix hit = kv.find_cached_prefix(b);
  ASSERT_EQ(hit.num_tokens, 4);
  // 13 tokens need 4 blocks: the hit plus 3 fresh, but only 2 others are free.
  EXPECT_FALSE(kv.allocate_slots(b, 9, hit));
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_TRUE(kv.allocate_slots(b, 8, hit));  // 12 tokens: 3 blocks
  EXPECT_EQ(b.blocks.size(), 3u);
  EXPECT_EQ(pool.num_free(), 0);
}

}  // namespace
}  // namespace pagedattn::serve
