// The paged KV cache's block allocator, as in vLLM v1's BlockPool: reference-counted blocks, a free
// queue in eviction order, and prefix caching by block hash. A full block's hash chains its
// parent's hash with its token ids, so two sequences with the same prefix have the same hashes and
// the second finds the first's blocks. Freed blocks keep their hash until they are reused, and the
// queue hands out the least recently freed block first (a sequence's tail before its head).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagedattn::serve {

using BlockHash = uint64_t;

// The hash of a full block: its parent's hash (0 for the first block) chained with its tokens.
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);

class BlockPool {
 public:
  // Block 0 is the null block: never handed out (graph padding rows point at it).
  BlockPool(int num_blocks, bool enable_prefix_caching);

  int num_blocks() const { return static_cast<int>(ref_count_.size()); }
  int num_usable() const { return num_blocks() - 1; }
  int num_free() const { return num_free_; }  // reference count 0, cached or not
  double usage() const { return 1.0 - static_cast<double>(num_free_) / num_usable(); }
  bool prefix_caching() const { return prefix_caching_; }

  // The cached blocks of the longest prefix of `hashes` (stops at the first miss). Takes nothing.
  std::vector<int> find_cached(std::span<const BlockHash> hashes) const;
  // Takes a reference on each block, removing a free one from the free queue.
  void touch(std::span<const int> blocks);
  // n blocks from the head of the free queue, their cached hashes evicted; nullopt (and nothing
  // taken) when fewer than n are free.
  std::optional<std::vector<int>> allocate(int n);
  // Drops a reference on each block, last block first; blocks reaching 0 join the queue's tail.
  void release(std::span<const int> blocks);
  // Records that `block` holds the full block `hash` (kept if another block has it already).
  void cache(int block, BlockHash hash);

  int ref_count(int block) const { return ref_count_[block]; }
  std::optional<BlockHash> hash_of(int block) const;
  // The free queue from head to tail (tests).
  std::vector<int> free_queue() const;

 private:
  void unlink(int block);
  void push_back(int block);

  bool prefix_caching_;
  std::vector<int> ref_count_;
  std::vector<std::optional<BlockHash>> hash_;
  std::unordered_map<BlockHash, int> cached_;
  // The free queue: a doubly linked list over block ids with sentinel num_blocks.
  std::vector<int> prev_, next_;
  int num_free_ = 0;
};

}  // namespace pagedattn::serve
