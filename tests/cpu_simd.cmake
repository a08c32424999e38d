# CPU_ATTN's tests again with the kernel forced onto other SIMD targets than the machine's best
# (PAGEDATTN_CPU_SIMD, read by the library): AVX2 and the portable one, so that every path is
# tested on a machine with AVX-512. Tests that choose their targets themselves are left out.
foreach(simd_target avx2 generic)
  add_test(NAME cpu_simd.${simd_target}
           COMMAND pagedattn_unit_tests
                   "--gtest_filter=*Cpu*:*Cascade*:*CacheWrite*:-*CpuConvert*:*CpuAttentionTargets*:*CpuBf16DotDecode*:*CpuSoftCap*:*CpuNaN*:*CpuSimdTarget*")
  set_tests_properties(cpu_simd.${simd_target} PROPERTIES
                       ENVIRONMENT PAGEDATTN_CPU_SIMD=${simd_target} TIMEOUT 900)
endforeach()
