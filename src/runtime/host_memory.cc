#include "runtime/host_memory.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pagedattn::runtime {
namespace {

constexpr size_t kLineAlignment = 256;  // vector loads; blocks on separate cache lines
constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t bytes, size_t to) {
  return (bytes + to - 1) / to * to;
}

}  // namespace

void* host_malloc_paged(size_t bytes) {
  if (bytes < kHugePage) return std::aligned_alloc(kLineAlignment, round_up(bytes, kLineAlignment));
  const size_t rounded = round_up(bytes, kHugePage);
  void* p = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__)
  if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused where THP is off
#endif
  return p;
}

}  // namespace pagedattn::runtime
