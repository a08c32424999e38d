// FLASHINFER's execution side (CUDA builds only): the builder and impl that
// backends/flashinfer/backend.cc hands out.
#pragma once

#include <memory>

#include "backends/common_prefix.h"
#include "pagedattn/backend.h"
#include "pagedattn/config.h"

namespace pagedattn::flashinfer {

// Cascade steps run both passes through the paged attention kernel, which places key positions
// from each pass's own lengths: ALiBi and windows cannot be expressed there.
inline constexpr backends::CascadeFeatures kCascadeFeatures{.alibi = false,
                                                            .sliding_window = false};

#if PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params);
StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params);
#endif

}  // namespace pagedattn::flashinfer
