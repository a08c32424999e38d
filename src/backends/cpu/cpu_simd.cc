// The dispatch point of CPU_ATTN's SIMD code (the decode kernel's is cpu_simd_decode.cc): Highway
// compiles the -inl.h files below once per target (foreach_target.h re-includes this file) and
// HWY_DYNAMIC_DISPATCH runs the chosen build.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/cpu_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "backends/cpu/attention_task-inl.h"
#include "backends/cpu/bf16_dot_probe-inl.h"
#include "backends/cpu/kv_widen-inl.h"
#include "backends/cpu/output_store-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pagedattn::cpu::HWY_NAMESPACE {

int64_t CurrentTarget() {
  return HWY_TARGET;
}

}  // namespace pagedattn::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/simd_target.h"

namespace pagedattn::cpu {

HWY_EXPORT(RunAttentionTask);
HWY_EXPORT(WidenRow);
HWY_EXPORT(ExpRow);
HWY_EXPORT(StoreOutputRow);
HWY_EXPORT(Bf16DotKernel);
HWY_EXPORT(WidenedDotKernel);
HWY_EXPORT(CurrentTarget);

void run_attention_task(const AttentionPass& pass, const Task& task, Scratch& scratch) {
  if (decode_kernel_applies(pass, task)) return run_decode_task(pass, task, scratch);
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(RunAttentionTask)(pass, task, scratch);
}

void widen_row(const void* src, DType dtype, int64_t offset, int n, float scale, float* dst) {
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(WidenRow)(src, dtype, offset, n, scale, dst);
}

void exp_row(const float* x, int n, float* y) {
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(ExpRow)(x, n, y);
}

void store_output_row(const float* src, int n, float multiplier, DType dtype, void* dst,
                      int64_t offset) {
  apply_simd_target_from_environment();
  HWY_DYNAMIC_DISPATCH(StoreOutputRow)(src, n, multiplier, dtype, dst, offset);
}

float bf16_dot_kernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops) {
  apply_simd_target_from_environment();
  return HWY_DYNAMIC_DISPATCH(Bf16DotKernel)(a, b, k, repeats, flops);
}

float widened_dot_kernel(const uint16_t* a, const uint16_t* b, int k, int repeats, int64_t* flops) {
  apply_simd_target_from_environment();
  return HWY_DYNAMIC_DISPATCH(WidenedDotKernel)(a, b, k, repeats, flops);
}

int64_t dispatched_simd_target() {
  apply_simd_target_from_environment();
  return HWY_DYNAMIC_DISPATCH(CurrentTarget)();
}

}  // namespace pagedattn::cpu
#endif  // HWY_ONCE
