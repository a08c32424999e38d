// The head sizes both GPU backends serve, in one place: multiples of 8 from 32 to 256, and 512,
// that a paged attention kernel of this build serves (PAGEDATTN_HEAD_SIZES may leave kernels out;
// prefills run through that family in every GPU backend). Host code, built with or without CUDA.
#pragma once

#include <string>

namespace pagedattn::gpu {

bool serves_head_size(int head_size);
std::string served_head_sizes_text();  // for "head_size not supported" reasons

}  // namespace pagedattn::gpu
