// The one contract every backend's build() applies to common_prefix_len (vLLM's cascade input):
// the caller decided (AttentionMetadataBuilder::use_cascade_attention); build() never decides
// again. It accepts the prefix or says why not, in the same words in every backend:
// CommonAttentionMetadata::validate_common_prefix for the prefix itself, and below for features.
#pragma once

#include <cstdint>
#include <string_view>

#include "pagedattn/backend.h"

namespace pagedattn::backends {

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

// An InvalidArgument naming common_prefix_len and deterministic when both are set: a deterministic
// builder runs no cascade (backends/builder_base.h says why; its use_cascade_attention never asks).
Status check_cascade_deterministic(std::string_view backend, int common_prefix_len,
                                   bool deterministic);

}  // namespace pagedattn::backends
