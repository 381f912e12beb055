# Installation and the find_package(troupe) package: targets troupe::sdk and
# troupe::model_runner (for plugins) and troupe::engine (for embedding
# services), plus the
# troupe_add_plugin() helper.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/troupe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The build's SDK fingerprint beside the headers it was computed from: a plugin
# built against the install stamps the fingerprint this troupe checks.
install(FILES ${TROUPE_SDK_FINGERPRINT_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe)
# Headers of the engine's C++ API (actors/engine.hpp) and what they include,
# under include/troupe_internal so they never mix with the plugin SDK.
foreach(dir net runtime actors plugin_host)
  install(DIRECTORY ${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe_internal FILES_MATCHING PATTERN "*.hpp")
endforeach()

set(troupe_export_targets)
foreach(t troupe_sdk troupe_model_runner troupe_kernels_cpu troupe_net troupe_runtime troupe_plugin_host troupe_engine)
  if(TARGET ${t})
    list(APPEND troupe_export_targets ${t})
  endif()
endforeach()
install(TARGETS ${troupe_export_targets} EXPORT troupeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET troupe)
  install(TARGETS troupe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(TROUPE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/troupe)
# Plugin authors need only troupe::sdk; CAF is a dependency of troupe::engine alone.
if(TARGET troupe_engine)
  set(TROUPE_CONFIG_NEEDS_CAF ON)
else()
  set(TROUPE_CONFIG_NEEDS_CAF OFF)
endif()
install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION ${TROUPE_CMAKE_DIR})
configure_package_config_file(cmake/troupeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/troupeConfig.cmake INSTALL_DESTINATION ${TROUPE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/troupeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/troupeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/troupeConfigVersion.cmake
  cmake/FindCAF.cmake cmake/TroupePlugin.cmake
  DESTINATION ${TROUPE_CMAKE_DIR})
