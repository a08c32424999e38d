// The dispatch point of CPU_ATTN's decode kernels (decode_task-inl.h: a task of one query row), as
// cpu_simd.cc is for the rest: Highway compiles them once per target (foreach_target.h re-includes
// this file) and HWY_DYNAMIC_DISPATCH runs the build of the target chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/cpu_simd_decode.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "backends/cpu/decode_task-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

void RunDecodeTask(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  run_decode(pass, task, scratch);
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/simd_target.h"

namespace pagedattn::cpu {

HWY_EXPORT(RunDecodeTask);

void run_decode_task(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(RunDecodeTask)(pass, task, scratch);
}

}  // namespace pagedattn::cpu
#endif  // HWY_ONCE
