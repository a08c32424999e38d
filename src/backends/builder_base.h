// What every backend's metadata builder shares: the BuilderParams it was made with, and the one
// cascade rule (cascade_attention_pays_off), which a deterministic builder never takes up: as vLLM
// turns cascade off under batch invariance, since whether a step has a shared prefix, and so how a
// request's sum is split and merged, depends on the rest of the batch.
#pragma once

#include <cstdint>
#include <span>

#include "pagedattn/backend.h"

namespace pagedattn::backends {

class BuilderBase : public AttentionMetadataBuilder {
 public:
  explicit BuilderBase(const BuilderParams& params) : params_(params) {}

  bool use_cascade_attention(int common_prefix_len, std::span<const int32_t> query_lens,
                             int num_query_heads, int num_kv_heads, bool use_alibi,
                             bool use_sliding_window, bool use_local_attention, int num_sms,
                             int dcp_world_size) const override;

 protected:
  BuilderParams params_;
};

}  // namespace pagedattn::backends
