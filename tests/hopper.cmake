# Tests of the Hopper device primitives (tests/gpu/test_hopper_*.cu): sm_90a code only, so a
# target of their own, built when 90a is among PAGEDATTN_CUDA_ARCHS. They skip visibly without a
# compute capability 9.0 device.
if(NOT PAGEDATTN_WITH_CUDA OR NOT "90a" IN_LIST PAGEDATTN_CUDA_ARCHS)
  return()
endif()
file(GLOB hopper_test_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_hopper_*.cu)
add_executable(pagedattn_hopper_tests ${hopper_test_sources})
set_target_properties(pagedattn_hopper_tests PROPERTIES CUDA_ARCHITECTURES 90a)
target_include_directories(pagedattn_hopper_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/gpu
                           ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(pagedattn_hopper_tests PRIVATE pagedattn pagedattn_testing GTest::gtest_main
                      CUDA::cudart pagedattn_warnings)
gtest_discover_tests(pagedattn_hopper_tests DISCOVERY_TIMEOUT 60)
