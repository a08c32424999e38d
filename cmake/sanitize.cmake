# Sanitizer and fuzzer builds (host only; scripts/sanitize.sh drives them).
#   PAGEDATTN_SANITIZE=address,undefined  every target is built with these -fsanitize= checks and
#                                         no recovery: the first report ends the process.
#   PAGEDATTN_FUZZ=ON                     also the libFuzzer targets in fuzz/ (needs clang), with the
#                                         library instrumented for coverage.
set(PAGEDATTN_SANITIZE "" CACHE STRING "Sanitizers for a host-only build, e.g. address,undefined")
option(PAGEDATTN_FUZZ "Build the libFuzzer targets in fuzz/ (clang, host only)" OFF)

if(PAGEDATTN_SANITIZE OR PAGEDATTN_FUZZ)
  if(PAGEDATTN_WITH_CUDA)
    message(FATAL_ERROR "PAGEDATTN_SANITIZE / PAGEDATTN_FUZZ are host-only: configure with "
                        "-DPAGEDATTN_CUDA=OFF")
  endif()
endif()

if(PAGEDATTN_SANITIZE)
  # Line tables are all a report's stack needs (full debug info cost 10 % more compile time).
  add_compile_options(-fsanitize=${PAGEDATTN_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer
                      $<IF:$<CXX_COMPILER_ID:Clang>,-gline-tables-only,-g>)
  add_link_options(-fsanitize=${PAGEDATTN_SANITIZE})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND PAGEDATTN_SANITIZE MATCHES "address")
    # clang links its ASan runtime statically into executables only, which leaves libpagedattn.so
    # with undefined __asan_* symbols (an error under its --no-undefined): link the shared runtime
    # everywhere, found through an rpath to clang's runtime folder. (The fuzz targets list libstdc++
    # before it, which ASan refuses: scripts/sanitize.sh runs them with the runtime in LD_PRELOAD.)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                    OUTPUT_VARIABLE asan_runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
    get_filename_component(asan_runtime_dir "${asan_runtime}" DIRECTORY)
    add_link_options(-shared-libasan "LINKER:-rpath,${asan_runtime_dir}")
  endif()
  message(STATUS "pagedattn: sanitizers ${PAGEDATTN_SANITIZE}")
endif()

if(PAGEDATTN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PAGEDATTN_FUZZ needs clang (libFuzzer), got ${CMAKE_CXX_COMPILER_ID}; "
                        "configure with -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  # Coverage feedback from the code the fuzzers aim at (core/: metadata, tensors, cache geometry,
  # selection; the CPU backend's builder and glue; the case parser), not the kernels and the oracle:
  # coverage everywhere made the sanitizer build's tests 20x slower than a release build's.
  # Deferred to the end of the top directory, when src/ is known.
  file(GLOB fuzz_instrumented CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/core/*.cc
       ${PROJECT_SOURCE_DIR}/src/backends/*.cc ${PROJECT_SOURCE_DIR}/src/backends/cpu/builder.cc
       ${PROJECT_SOURCE_DIR}/src/backends/cpu/backend.cc ${PROJECT_SOURCE_DIR}/src/backends/cpu/impl.cc
       ${PROJECT_SOURCE_DIR}/src/backends/cpu/forward.cc
       ${PROJECT_SOURCE_DIR}/src/backends/cpu/cache_update.cc
       ${PROJECT_SOURCE_DIR}/src/testing/case_*.cc)
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL set_source_files_properties
                 ${fuzz_instrumented} DIRECTORY ${PROJECT_SOURCE_DIR}/src
                 PROPERTIES COMPILE_OPTIONS -fsanitize=fuzzer-no-link)
  # The fuzz targets link pagedattn and pagedattn_testing, defined later under src/: CMake resolves
  # link names when it generates, so the order does not matter.
  add_subdirectory(${PROJECT_SOURCE_DIR}/fuzz ${PROJECT_BINARY_DIR}/fuzz)
endif()
