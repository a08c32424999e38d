// The dispatch point of CPU_ATTN's decode kernel on FP8 caches (e4m3, e5m2), compiled once per
// Highway target beside cpu_simd_decode.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/cpu_simd_decode_fp8.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "backends/cpu/decode_task-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

void RunFp8DecodeTask(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  if (pass.kv.dtype == DType::kFP8E5M2) return run_decode_of<DType::kFP8E5M2>(pass, task, scratch);
  return run_decode_of<DType::kFP8E4M3>(pass, task, scratch);
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/simd_target.h"

namespace pagedattn::cpu {

HWY_EXPORT(RunFp8DecodeTask);

void run_fp8_decode_task(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(RunFp8DecodeTask)(pass, task, scratch);
}

}  // namespace pagedattn::cpu
#endif  // HWY_ONCE
