// The SIMD target CPU_ATTN's kernels run on. Highway picks the best one this build has and the CPU
// supports; PAGEDATTN_CPU_SIMD (read before the first kernel call) or force_simd_target narrows it,
// which is how tests run every path on one machine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pagedattn/status.h"

namespace pagedattn::cpu {

// The target the kernels run on now, e.g. "AVX3_DL".
std::string simd_target();

// Targets this build has and this CPU supports, best first, e.g. {"AVX3_DL", "AVX3", "AVX2",
// "SSE4", "SCALAR"}.
std::vector<std::string> simd_targets_available();

// Runs the kernels on `name`: a target of simd_targets_available() (any case), "generic" for the
// portable one, or "best". Anything else is InvalidArgument naming the choices; nothing changes.
Status force_simd_target(std::string_view name);

// Applies PAGEDATTN_CPU_SIMD once (an unusable value is reported on stderr and ignored).
void apply_simd_target_from_environment();

}  // namespace pagedattn::cpu
