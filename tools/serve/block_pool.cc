// BlockPool: free queue as an intrusive doubly linked list so that taking a cached block out of
// the middle (a prefix hit on a freed block) is O(1), as in vLLM's FreeKVCacheBlockQueue.
#include "serve/block_pool.h"

namespace pagedattn::serve {

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the token ids, then a splitmix64 finaliser.
  uint64_t h = 0xCBF29CE484222325ull ^ parent;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 0x100000001B3ull;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

BlockPool::BlockPool(int num_blocks, bool enable_prefix_caching)
    : prefix_caching_(enable_prefix_caching),
      ref_count_(num_blocks, 0),
      hash_(num_blocks),
      prev_(num_blocks + 1),
      next_(num_blocks + 1) {
  const int sentinel = num_blocks;
  prev_[sentinel] = next_[sentinel] = sentinel;
  ref_count_[0] = 1;  // the null block is never free
  for (int b = 1; b < num_blocks; ++b) push_back(b);
}

void BlockPool::unlink(int block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  --num_free_;
}

void BlockPool::push_back(int block) {
  const int sentinel = num_blocks();
  prev_[block] = prev_[sentinel];
  next_[block] = sentinel;
  next_[prev_[sentinel]] = block;
  prev_[sentinel] = block;
  ++num_free_;
}

std::vector<int> BlockPool::find_cached(std::span<const BlockHash> hashes) const {
  std::vector<int> hits;
  if (!prefix_caching_) return hits;
  for (BlockHash h : hashes) {
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    hits.push_back(it->second);
  }
  return hits;
}

void BlockPool::touch(std::span<const int> blocks) {
  for (int b : blocks) {
    if (ref_count_[b]++ == 0) unlink(b);
  }
}

std::optional<std::vector<int>> BlockPool::allocate(int n) {
  if (n > num_free_) return std::nullopt;
  std::vector<int> blocks;
  blocks.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int b = next_[num_blocks()];
    unlink(b);
    if (hash_[b]) {  // evict: the block's old contents are about to be overwritten
      auto it = cached_.find(*hash_[b]);
      if (it != cached_.end() && it->second == b) cached_.erase(it);
      hash_[b].reset();
    }
    ref_count_[b] = 1;
    blocks.push_back(b);
  }
  return blocks;
}

void BlockPool::release(std::span<const int> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (--ref_count_[*it] == 0) push_back(*it);
  }
}

void BlockPool::cache(int block, BlockHash hash) {
  if (!prefix_caching_ || hash_[block]) return;
  if (cached_.emplace(hash, block).second) hash_[block] = hash;
}

std::optional<BlockHash> BlockPool::hash_of(int block) const {
  return hash_[block];
}

std::vector<int> BlockPool::free_queue() const {
  std::vector<int> out;
  for (int b = next_[num_blocks()]; b != num_blocks(); b = next_[b]) out.push_back(b);
  return out;
}

}  // namespace pagedattn::serve
