// The KV-cache manager of a vLLM v1-like engine over a BlockPool: prefix-cache lookups for a new
// request, slots for the tokens scheduled this step, registering blocks that became full, and
// freeing a finished or preempted request's blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "serve/block_pool.h"
#include "serve/request.h"

namespace pagedattn::serve {

struct CachedPrefix {
  std::vector<int> blocks;  // blocks holding the request's leading tokens
  int num_tokens = 0;       // blocks.size() * block_size
};

class KVCacheManager {
 public:
  KVCacheManager(BlockPool& pool, int block_size) : pool_(pool), block_size_(block_size) {}

  // The longest cached prefix of the request's tokens, leaving at least one token to compute
  // (the step must produce a query for the last token). Counts a prefix-cache query.
  CachedPrefix find_cached_prefix(Request& request);
  // Blocks for `num_new_tokens` more tokens after `prefix` (a new request's cache hits; empty for
  // a running one). On success the request holds the prefix and enough blocks; on failure nothing
  // changes (the caller preempts or waits).
  bool allocate_slots(Request& request, int num_new_tokens, const CachedPrefix& prefix = {});
  // Registers the request's blocks that are full after `num_computed_tokens`.
  void cache_full_blocks(Request& request, int num_computed_tokens);
  // Releases the request's blocks (finished or preempted).
  void free(Request& request);

  int block_size() const { return block_size_; }
  int64_t prefix_query_tokens() const { return query_tokens_; }
  int64_t prefix_hit_tokens() const { return hit_tokens_; }

 private:
  void extend_hashes(Request& request, int num_full_blocks) const;

  BlockPool& pool_;
  int block_size_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace pagedattn::serve
