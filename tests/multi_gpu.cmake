# multi_gpu/: programs that are one rank of a group of processes, one GPU each, started together by
# scripts/dcp_multi_gpu.sh (each test skips visibly when run alone).
if(NOT PAGEDATTN_WITH_CUDA)
  return()
endif()
file(GLOB multi_gpu_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/multi_gpu/*.cc
     ${CMAKE_CURRENT_SOURCE_DIR}/support/*.cc)
add_executable(pagedattn_multi_gpu_tests ${multi_gpu_sources})
# The one-GPU DCP tests' support (tests/gpu) serves each rank here.
target_include_directories(pagedattn_multi_gpu_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                           ${CMAKE_CURRENT_SOURCE_DIR}/gpu ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(pagedattn_multi_gpu_tests PRIVATE pagedattn pagedattn_testing GTest::gtest_main
                      CUDA::cudart pagedattn_warnings)
gtest_discover_tests(pagedattn_multi_gpu_tests DISCOVERY_TIMEOUT 60)
