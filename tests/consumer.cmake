# CTest entry: the installed package works for a project outside this tree (tests/consumer).
add_test(NAME consumer_find_package
         COMMAND ${CMAKE_COMMAND}
                 -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/consumer
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer
                 -DGENERATOR=${CMAKE_GENERATOR}
                 -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 -P ${CMAKE_CURRENT_LIST_DIR}/consumer/run_consumer.cmake)
set_tests_properties(consumer_find_package PROPERTIES TIMEOUT 300)
