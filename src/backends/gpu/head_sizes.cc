#include "backends/gpu/head_sizes.h"

#include "pagedattn/config.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/attention/paged_attention.h"
#endif

namespace pagedattn::gpu {

bool serves_head_size(int head_size) {
  const bool in_range =
      head_size % 8 == 0 && ((head_size >= 32 && head_size <= 256) || head_size == 512);
  if (!in_range) return false;
#if PAGEDATTN_WITH_CUDA
  return kernels::paged_attention_kernel_head_size(head_size) != 0;
#else
  return true;
#endif
}

std::string served_head_sizes_text() {
  std::string text = "multiples of 8 from 32 to 256, and 512";
  if (PAGEDATTN_WITH_CUDA) text += std::string(" (kernels built: ") + PAGEDATTN_HEAD_SIZES + ")";
  return text;
}

}  // namespace pagedattn::gpu
