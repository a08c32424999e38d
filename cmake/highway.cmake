# Google Highway (Debian: libhwy-dev) for CPU_ATTN's SIMD code: src/backends/cpu/cpu_simd*.cc are
# compiled once per target below, and the best one the CPU supports runs (chosen at run time).
find_package(hwy 1.0 REQUIRED)

add_library(pagedattn_highway INTERFACE)
target_link_libraries(pagedattn_highway INTERFACE hwy::hwy)
# Targets: AVX3 (AVX-512), AVX2, SSE4 and the portable baseline (HWY_SCALAR with GCC 12.2, whose
# EMU128 Highway marks broken), NEON on Arm. SSSE3 adds nothing but compile time; the kernel keeps
# arrays of vectors, which the sizeless SVE and RVV vectors do not allow.
# AVX3_DL (Ice Lake and later, Zen 4) is wanted for the decode kernel's bf16 dot products
# (decode_bf16_dot-inl.h), which need its VBMI and add AVX512_BF16 where the CPU has it.
# PAGEDATTN_SIMD_LEFT_OUT drops more (e.g. HWY_SSE4|HWY_AVX3): the sanitizer build compiles the
# best target of its machine, AVX2 and the baseline only, since each target is a full compile of
# the kernels under the sanitizers.
set(PAGEDATTN_SIMD_LEFT_OUT "" CACHE STRING "Highway targets to leave out besides the defaults")
set(simd_left_out "HWY_SSSE3|HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128|HWY_RVV")
if(PAGEDATTN_SIMD_LEFT_OUT)
  string(APPEND simd_left_out "|${PAGEDATTN_SIMD_LEFT_OUT}")
endif()
target_compile_definitions(pagedattn_highway INTERFACE HWY_WANT_AVX3_DL
  "HWY_DISABLED_TARGETS=(${simd_left_out})")
