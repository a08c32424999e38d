// The attention kernel built for the baseline instruction set (any CPU).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/attention_kernel_internal.h"
#include "common/numeric.h"
#include "common/mask.h"

namespace pagedattn::cpu::generic {
#include "backends/cpu/attention_kernel_body.inc"
}  // namespace pagedattn::cpu::generic
