// Host memory for large buffers read at the memory's speed (KV caches).
#pragma once

#include <cstddef>

namespace pagedattn::runtime {

// At least `bytes` bytes, 256-byte aligned, released with std::free; nullptr on failure. From
// 2 MiB on, aligned to 2 MiB and marked for transparent huge pages before the first touch (where
// the kernel has them): a paged KV cache's blocks sit at scattered addresses, and with 4 KiB
// pages every few blocks cost a page walk.
void* host_malloc_paged(size_t bytes);

}  // namespace pagedattn::runtime
