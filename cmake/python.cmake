# The Python package (python/): the extension module pagedattn._C (pybind11, Debian's pybind11-dev)
# next to the pure-Python package, assembled in ${PROJECT_BINARY_DIR}/python/pagedattn so that
# PYTHONPATH=build/python imports it from the build tree. PAGEDATTN_PYTHON: AUTO (build it when
# pybind11, the Python headers and NumPy are found), ON (require them) or OFF. Wheels for pip come
# from the same rules (python/build_backend/, docs/install.md).
set(PAGEDATTN_PYTHON "AUTO" CACHE STRING "Build the Python package: AUTO, ON or OFF")
set_property(CACHE PAGEDATTN_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(PAGEDATTN_WITH_PYTHON OFF)
if(PAGEDATTN_PYTHON STREQUAL "OFF" OR NOT PAGEDATTN_PYTHON)
  return()
endif()

# Debian's python3 is the one its python3-torch, python3-numpy and pybind11-dev install into (a
# pyenv or venv python3 earlier on PATH would have none of them); pass -DPython3_EXECUTABLE=... to
# build for another interpreter (pip does: it builds for the interpreter that runs it).
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
set(PYBIND11_FINDPYTHON ON)
if(PAGEDATTN_PYTHON STREQUAL "AUTO")
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  find_package(pybind11 CONFIG QUIET)
else()
  find_package(Python3 COMPONENTS Interpreter Development.Module REQUIRED)
  find_package(pybind11 CONFIG REQUIRED)
endif()
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(STATUS "pagedattn: Python package OFF (needs pybind11-dev and python3-dev)")
  return()
endif()
# `import pagedattn` needs NumPy (the drop-ins compute slots and scales with it); a module built for
# an interpreter without it could not be imported, so say so here, once, instead of at import.
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy" RESULT_VARIABLE pagedattn_numpy_missing
                OUTPUT_QUIET ERROR_QUIET)
if(pagedattn_numpy_missing)
  set(pagedattn_no_numpy "${Python3_EXECUTABLE} has no NumPy, which pagedattn needs (Debian's "
      "python3-numpy is for /usr/bin/python3)")
  if(PAGEDATTN_PYTHON STREQUAL "AUTO")
    message(STATUS "pagedattn: Python package OFF: ${pagedattn_no_numpy}")
    return()
  endif()
  message(FATAL_ERROR "pagedattn: ${pagedattn_no_numpy}")
endif()
set(PAGEDATTN_WITH_PYTHON ON)
message(STATUS "pagedattn: Python package for ${Python3_EXECUTABLE} (${Python3_VERSION}), pybind11 ${pybind11_VERSION}")

set(pagedattn_python_dir ${PROJECT_BINARY_DIR}/python/pagedattn)
file(GLOB pagedattn_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cc)
pybind11_add_module(pagedattn_python MODULE ${pagedattn_python_sources})
target_link_libraries(pagedattn_python PRIVATE pagedattn pagedattn_warnings)
set_target_properties(pagedattn_python PROPERTIES
  OUTPUT_NAME _C
  LIBRARY_OUTPUT_DIRECTORY ${pagedattn_python_dir}
  INSTALL_RPATH "$ORIGIN")  # installed next to libpagedattn (below)

# pagedattn.build_info()'s header, rewritten at every build with the commit checked out then.
find_package(Git QUIET)
set(pagedattn_build_info_dir ${PROJECT_BINARY_DIR}/python/generated)
add_custom_target(pagedattn_build_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DGIT_EXECUTABLE=${GIT_EXECUTABLE}
          -DOUTPUT=${pagedattn_build_info_dir}/pagedattn_build_info.h -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -DPYTHON_VERSION=${Python3_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/build_info.cmake
  BYPRODUCTS ${pagedattn_build_info_dir}/pagedattn_build_info.h
  COMMENT "pagedattn: build info (git commit)" VERBATIM)
add_dependencies(pagedattn_python pagedattn_build_info)
target_include_directories(pagedattn_python PRIVATE ${pagedattn_build_info_dir})

# The pure-Python files, copied beside the module at build time.
file(GLOB pagedattn_python_package CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/pagedattn/*.py)
set(pagedattn_python_copies)
foreach(source IN LISTS pagedattn_python_package)
  get_filename_component(name ${source} NAME)
  add_custom_command(OUTPUT ${pagedattn_python_dir}/${name}
                     COMMAND ${CMAKE_COMMAND} -E copy_if_different ${source} ${pagedattn_python_dir}/${name}
                     DEPENDS ${source})
  list(APPEND pagedattn_python_copies ${pagedattn_python_dir}/${name})
endforeach()
add_custom_target(pagedattn_python_files ALL DEPENDS ${pagedattn_python_copies})
add_dependencies(pagedattn_python pagedattn_python_files)

# `cmake --install build --component python --prefix DIR` puts the package in DIR/pagedattn, with
# libpagedattn (under its soname, the one name the module asks for) beside the module. The wheel
# for pip is made from that (python/build_backend/); a plain `cmake --install` leaves it out.
install(TARGETS pagedattn_python LIBRARY DESTINATION pagedattn COMPONENT python EXCLUDE_FROM_ALL)
install(FILES ${pagedattn_python_package} DESTINATION pagedattn COMPONENT python EXCLUDE_FROM_ALL)
install(FILES $<TARGET_FILE:pagedattn> RENAME $<TARGET_SONAME_FILE_NAME:pagedattn>
        DESTINATION pagedattn COMPONENT python EXCLUDE_FROM_ALL)

# tests/python/test_*.py, one CTest entry each, run by the interpreter the module was built for
# against the build tree's package; the case tests also need the CLI (for the C++ side's dumps).
if(PAGEDATTN_BUILD_TESTS)
  set(pagedattn_case_dirs ${PROJECT_SOURCE_DIR}/cases)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/../shared/cases)
    string(APPEND pagedattn_case_dirs ":${PROJECT_SOURCE_DIR}/../shared/cases")
  endif()
  set(pagedattn_cli_path "")
  if(TARGET pagedattn_cli)
    set(pagedattn_cli_path $<TARGET_FILE:pagedattn_cli>)
  endif()
  set(pagedattn_case_dumps ${PROJECT_BINARY_DIR}/python_case_dumps)
  set(pagedattn_python_env "PYTHONPATH=${PROJECT_BINARY_DIR}/python;PAGEDATTN_CLI=${pagedattn_cli_path};PAGEDATTN_CASE_DIRS=${pagedattn_case_dirs};PAGEDATTN_CASE_DUMPS=${pagedattn_case_dumps};PYTHONDONTWRITEBYTECODE=1")
  # The C++ side of every case, dumped once for the tests that compare with it.
  add_test(NAME python.case_dumps COMMAND ${Python3_EXECUTABLE} case_dumps.py ${pagedattn_case_dumps}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/python)
  set_tests_properties(python.case_dumps PROPERTIES LABELS python TIMEOUT 900 FIXTURES_SETUP python_case_dumps
                       ENVIRONMENT "${pagedattn_python_env}")
  file(GLOB pagedattn_python_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/python/test_*.py)
  foreach(test_file IN LISTS pagedattn_python_tests)
    get_filename_component(test_name ${test_file} NAME_WE)
    add_test(NAME python.${test_name}
             COMMAND ${Python3_EXECUTABLE} -m unittest -v ${test_name}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/python)
    # After the dumps (several tests read them; none may see a half-written one).
    set_tests_properties(python.${test_name} PROPERTIES LABELS python TIMEOUT 900
                         ENVIRONMENT "${pagedattn_python_env}" FIXTURES_REQUIRED python_case_dumps)
  endforeach()
endif()
