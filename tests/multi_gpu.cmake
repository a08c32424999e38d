# multi_gpu/: programs that are one rank of a group of processes, one GPU each, started together by
# scripts/nccl_ranks.sh (each test skips visibly when run alone).
if(NOT PAGEDATTN_WITH_CUDA)
  return()
endif()
file(GLOB multi_gpu_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/multi_gpu/*.cc)
add_executable(pagedattn_nccl_rank_tests ${multi_gpu_sources})
target_include_directories(pagedattn_nccl_rank_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                           ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(pagedattn_nccl_rank_tests PRIVATE pagedattn GTest::gtest_main CUDA::cudart
                      pagedattn_warnings)
gtest_discover_tests(pagedattn_nccl_rank_tests DISCOVERY_TIMEOUT 60)
