// FLASH_ATTN's execution side (CUDA builds only): the builder and impl that
// backends/flash_attn/backend.cc hands out, and the kernel-generation choice.
#pragma once

#include <memory>

#include "backends/common_prefix.h"
#include "pagedattn/backend.h"

namespace pagedattn::flash_attn {

// The kernel derives key positions from each pass's own lengths, so a cascade pass cannot place
// ALiBi distances or a window against absolute positions: build() refuses those cascades.
inline constexpr backends::CascadeFeatures kCascadeFeatures{.alibi = false, .sliding_window = false};

// Like vLLM's get_flash_attn_version: the kernel generation for this head size, ALiBi use and
// device (2 = mma.sync "v2", sm_80+; 3 = Hopper wgmma "v3", sm_90a builds); 0 = none can serve it.
int flash_attn_version(ComputeCapability cc, int head_size, bool requires_alibi);

#if PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params);
StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params);
#endif

}  // namespace pagedattn::flash_attn
