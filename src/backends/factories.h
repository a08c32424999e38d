// The registered backends' descriptions (capabilities and validation), one object each.
#pragma once

#include "pagedattn/backend.h"

namespace pagedattn {

const AttentionBackend& flash_attn_backend();  // backends/flash_attn/backend.cc
const AttentionBackend& flashinfer_backend();  // backends/flashinfer/backend.cc
const AttentionBackend& cpu_attn_backend();    // backends/cpu/backend.cc

}  // namespace pagedattn
