// CPU_ATTN's execution side: the builder and impl that backends/cpu/backend.cc hands out.
#pragma once

#include <memory>

#include "pagedattn/backend.h"

namespace pagedattn::cpu {

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params);
StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params);

}  // namespace pagedattn::cpu
