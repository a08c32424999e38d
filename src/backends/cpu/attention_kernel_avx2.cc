// The attention kernel built for x86-64 with AVX2, FMA and F16C (chosen at run time when the CPU
// has them). Standard headers come first so that only the kernel body gets the wider target.
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

#if defined(__x86_64__) && defined(__GNUC__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#define PAGEDATTN_CPU_F16C 1
namespace pagedattn::cpu::avx2 {
#include "backends/cpu/attention_kernel_body.inc"
}  // namespace pagedattn::cpu::avx2
#undef PAGEDATTN_CPU_F16C

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace pagedattn::cpu::avx2 {
// Never selected off x86-64 (the driver checks the CPU); defers to the portable build.
void run_task(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  generic::run_task(pass, task, scratch);
}
}  // namespace pagedattn::cpu::avx2
#endif
