// The size of the processor's last-level cache, which decides whether a shared prefix is read
// from memory once per request (CPU_ATTN's cascade rule).
#pragma once

#include <cstdint>

namespace pagedattn::cpu {

// Bytes of the largest cache level of CPU 0 (Linux sysfs, else sysconf); 0 when unknown.
int64_t last_level_cache_bytes();

}  // namespace pagedattn::cpu
