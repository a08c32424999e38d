// The dispatch point of CPU_ATTN's decode kernel on f32, f16 and bf16 caches (FP8 caches:
// cpu_simd_decode_fp8.cc), compiled once per Highway target apart from cpu_simd.cc so that the
// largest SIMD builds compile side by side.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/cpu_simd_decode.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "backends/cpu/decode_task-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

void RunDecodeTask(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  switch (pass.kv.dtype) {
    case DType::kF32: return run_decode_of<DType::kF32>(pass, task, scratch);
    case DType::kF16: return run_decode_of<DType::kF16>(pass, task, scratch);
    default: return run_decode_of<DType::kBF16>(pass, task, scratch);
  }
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/simd_target.h"

namespace pagedattn::cpu {

HWY_EXPORT(RunDecodeTask);

void run_decode_task(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  if (is_fp8(pass.kv.dtype)) return run_fp8_decode_task(pass, task, scratch);
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(RunDecodeTask)(pass, task, scratch);
}

}  // namespace pagedattn::cpu
#endif  // HWY_ONCE
