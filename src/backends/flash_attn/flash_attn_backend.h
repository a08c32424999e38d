// FLASH_ATTN's execution side (CUDA builds only): the builder and impl that
// backends/flash_attn/backend.cc hands out.
#pragma once

#include <memory>

#include "backends/common_prefix.h"
#include "pagedattn/backend.h"

namespace pagedattn::flash_attn {

// The kernel derives key positions from each pass's own lengths, so a cascade pass cannot place
// ALiBi distances or a window against absolute positions: build() refuses those cascades.
inline constexpr backends::CascadeFeatures kCascadeFeatures{.alibi = false, .sliding_window = false};

#if PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params);
StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params);
#endif

}  // namespace pagedattn::flash_attn
