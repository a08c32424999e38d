# `cmake --install` puts headers, the library and a package config in place so that a consumer's
# find_package(pagedattn) works.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS pagedattn EXPORT pagedattnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pagedattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/pagedattn/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pagedattn)
install(EXPORT pagedattnTargets NAMESPACE pagedattn::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pagedattn)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pagedattnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pagedattnConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pagedattn)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pagedattnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pagedattnConfig.cmake ${PROJECT_BINARY_DIR}/pagedattnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pagedattn)
if(PAGEDATTN_BUILD_TOOLS)
  install(TARGETS pagedattn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
