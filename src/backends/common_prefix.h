// The one contract every backend's build() applies to common_prefix_len (vLLM's cascade input):
// the caller decided (AttentionMetadataBuilder::use_cascade_attention); build() never decides
// again. It accepts the prefix or says why not, in the same words in every backend.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "pagedattn/backend.h"

namespace pagedattn::backends {

// 0 (no cascade), or a multiple of block_size that every request's context holds (so the shared
// prefix contains no query token), with at least one request.
Status check_common_prefix_len(int common_prefix_len, int block_size,
                               std::span<const int32_t> query_start_loc,
                               std::span<const int32_t> seq_lens);

// The features a backend's cascade passes can express.
struct CascadeFeatures {
  bool alibi = false;
  bool sliding_window = false;
};

// An InvalidArgument naming the feature when common_prefix_len > 0 and the layer uses ALiBi or a
// sliding window that `served` lacks (build() from BuilderParams; forward again from the layer's
// own parameters, in case the builder was made for another layer).
Status check_cascade_features(std::string_view backend, int common_prefix_len, bool use_alibi,
                              bool use_sliding_window, CascadeFeatures served);

}  // namespace pagedattn::backends
