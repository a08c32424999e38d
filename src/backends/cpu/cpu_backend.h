// CPU_ATTN's execution side: the builder and impl that backends/cpu/backend.cc hands out.
#pragma once

#include <memory>

#include "pagedattn/backend.h"

namespace pagedattn::cpu {

// The head sizes and dtypes CPU_ATTN serves, checked by make_builder and make_impl alike.
Status check_served(int head_size, DType dtype);

StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(const BuilderParams& params);
StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams& params);

}  // namespace pagedattn::cpu
