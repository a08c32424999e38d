// KVCacheManager: vLLM v1's allocate_slots accounting (cache hits that are free still count
// against the free blocks, since taking them removes them from the free queue).
#include "serve/kv_manager.h"

#include <algorithm>
#include <span>

namespace pagedattn::serve {

void KVCacheManager::extend_hashes(Request& r, int num_full_blocks) const {
  while (static_cast<int>(r.block_hashes.size()) < num_full_blocks) {
    const size_t i = r.block_hashes.size();
    const BlockHash parent = i == 0 ? 0 : r.block_hashes[i - 1];
    r.block_hashes.push_back(hash_block(
        parent, std::span<const int32_t>(r.tokens).subspan(i * block_size_, block_size_)));
  }
}

CachedPrefix KVCacheManager::find_cached_prefix(Request& r) {
  CachedPrefix prefix;
  query_tokens_ += r.num_tokens();
  if (!pool_.prefix_caching()) return prefix;
  const int max_blocks = (r.num_tokens() - 1) / block_size_;
  extend_hashes(r, max_blocks);
  prefix.blocks = pool_.find_cached(std::span<const BlockHash>(r.block_hashes).first(max_blocks));
  prefix.num_tokens = static_cast<int>(prefix.blocks.size()) * block_size_;
  hit_tokens_ += prefix.num_tokens;
  return prefix;
}

bool KVCacheManager::allocate_slots(Request& r, int num_new_tokens, const CachedPrefix& prefix) {
  const int computed = std::max(r.num_computed_tokens, prefix.num_tokens);
  const int needed = (computed + num_new_tokens + block_size_ - 1) / block_size_;
  const int have = static_cast<int>(r.blocks.size() + prefix.blocks.size());
  const int to_allocate = std::max(0, needed - have);
  const int free_hits = static_cast<int>(std::count_if(
      prefix.blocks.begin(), prefix.blocks.end(), [&](int b) { return pool_.ref_count(b) == 0; }));
  if (to_allocate + free_hits > pool_.num_free()) return false;
  pool_.touch(prefix.blocks);
  r.blocks.insert(r.blocks.end(), prefix.blocks.begin(), prefix.blocks.end());
  r.num_cached_blocks = std::max(r.num_cached_blocks, static_cast<int>(prefix.blocks.size()));
  std::optional<std::vector<int>> fresh = pool_.allocate(to_allocate);
  r.blocks.insert(r.blocks.end(), fresh->begin(), fresh->end());
  return true;
}

void KVCacheManager::cache_full_blocks(Request& r, int num_computed_tokens) {
  if (!pool_.prefix_caching()) return;
  const int full = num_computed_tokens / block_size_;
  extend_hashes(r, full);
  for (int i = r.num_cached_blocks; i < full; ++i) pool_.cache(r.blocks[i], r.block_hashes[i]);
  r.num_cached_blocks = std::max(r.num_cached_blocks, full);
}

void KVCacheManager::free(Request& r) {
  pool_.release(r.blocks);
  r.blocks.clear();
  r.num_cached_blocks = 0;
}

}  // namespace pagedattn::serve
