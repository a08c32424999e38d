# cmake -P script run by CTest: install the built package into a fresh prefix, then configure,
# build and run the consumer project against it with find_package(pagedattn).
# Inputs: BUILD_DIR (this project's build), SOURCE_DIR (tests/consumer), WORK_DIR (scratch),
#         GENERATOR, CXX_COMPILER.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${step} failed (${rc})")
  endif()
endfunction()

run(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=Release)
run(build ${CMAKE_COMMAND} --build ${consumer_build})
run(run ${consumer_build}/consumer)
