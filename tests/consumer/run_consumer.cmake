# cmake -P script run by CTest: install the built package into a fresh prefix, run the installed
# tool from there (when CLI is given), then configure, build and run the consumer project against
# it with find_package(pagedattn).
# Inputs: BUILD_DIR (this project's build), SOURCE_DIR (tests/consumer), WORK_DIR (scratch),
#         GENERATOR, CXX_COMPILER; optional CLI (the tool's path relative to the prefix).
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

# The C++ package only (a full install leaves the python component out too; it is for wheels).
run(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component Unspecified)
if(DEFINED CLI)
  # No LD_LIBRARY_PATH: the tool must find the prefix's library through its own RPATH.
  set(clean_env ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH)
  run(installed-info ${clean_env} ${prefix}/${CLI} info)
  execute_process(COMMAND ${clean_env} LD_TRACE_LOADED_OBJECTS=1 ${prefix}/${CLI}
                  OUTPUT_VARIABLE loaded RESULT_VARIABLE rc)
  string(FIND "${loaded}" "libpagedattn.so.0 => ${prefix}/" from_prefix)
  if(NOT rc EQUAL 0 OR from_prefix EQUAL -1)
    message(FATAL_ERROR "consumer test: ${CLI} does not load the prefix's library:\n${loaded}")
  endif()
endif()
run(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=Release)
run(build ${CMAKE_COMMAND} --build ${consumer_build})
run(run ${consumer_build}/consumer)
