# CTest entry: the installed package works from its prefix: the tool runs from bin/ (its RPATH
# finds lib/) and a project outside this tree builds against it (tests/consumer).
set(installed_cli "")
if(TARGET pagedattn_cli)
  include(GNUInstallDirs)
  set(installed_cli -DCLI=${CMAKE_INSTALL_BINDIR}/pagedattn)
endif()
add_test(NAME consumer_find_package
         COMMAND ${CMAKE_COMMAND}
                 -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/consumer
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer
                 -DGENERATOR=${CMAKE_GENERATOR}
                 -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 ${installed_cli}
                 -P ${CMAKE_CURRENT_LIST_DIR}/consumer/run_consumer.cmake)
set_tests_properties(consumer_find_package PROPERTIES TIMEOUT 300)
