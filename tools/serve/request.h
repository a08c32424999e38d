// A request as the scheduler tracks it (vLLM v1's Request): its tokens so far (prompt, then one
// sampled token per finished step), how many have their keys/values in the cache, its blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "serve/block_pool.h"

namespace pagedattn::serve {

enum class RequestStatus { kWaiting, kRunning, kPreempted, kFinished };

struct Request {
  int id = 0;
  int arrival_step = 0;
  int num_prompt_tokens = 0;
  int max_output_tokens = 1;
  std::vector<int32_t> tokens;          // prompt + generated
  int num_computed_tokens = 0;          // tokens whose K/V are in the cache
  std::vector<int> blocks;              // the cache blocks, in order
  std::vector<BlockHash> block_hashes;  // of the full blocks of `tokens`, filled as needed
  int num_cached_blocks = 0;            // leading blocks registered in the prefix cache
  RequestStatus status = RequestStatus::kWaiting;
  int num_preemptions = 0;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace pagedattn::serve
