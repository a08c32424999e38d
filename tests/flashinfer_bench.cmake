# The FLASHINFER host-cost benchmark (Google Benchmark; bench/flashinfer_plan_bench.cc): built with
# CUDA when libbenchmark is installed, not run by CTest (a benchmark, not a test).
if(NOT PAGEDATTN_WITH_CUDA)
  return()
endif()
find_package(benchmark QUIET)
if(NOT benchmark_FOUND)
  return()
endif()
add_executable(flashinfer_plan_bench ${PROJECT_SOURCE_DIR}/bench/flashinfer_plan_bench.cc)
target_include_directories(flashinfer_plan_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(flashinfer_plan_bench PRIVATE pagedattn benchmark::benchmark CUDA::cudart
                      pagedattn_warnings)
