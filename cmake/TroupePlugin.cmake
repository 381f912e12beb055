# troupe_add_plugin: the one way to build a troupe plugin, used by the
# built-in platforms and by third parties alike (after find_package(troupe)).
#
#   troupe_add_plugin(<target>
#     NAME <plugin name>            # what TROUPE_PLUGINS filters on
#     GROUP <entry-point group>     # e.g. troupe.platform_plugins
#     SOURCES <files...>
#     [OUTPUT_DIR <dir>]            # where library + manifest go in the build tree
#     [INSTALL_DIR <dir>])          # where `cmake --install` puts them
#
# It builds a MODULE library that links troupe::sdk and writes the manifest
# `<name>.troupe-plugin.json` (name, group, library, symbol) beside it: a
# directory holding both is a plugin directory for TROUPE_PLUGIN_PATH.
function(troupe_add_plugin target)
  cmake_parse_arguments(P "" "NAME;GROUP;OUTPUT_DIR;INSTALL_DIR" "SOURCES" ${ARGN})
  if(NOT P_NAME OR NOT P_GROUP)
    message(FATAL_ERROR "troupe_add_plugin(${target}): NAME and GROUP are required")
  endif()
  if(NOT P_OUTPUT_DIR)
    set(P_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/plugins")
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE troupe::sdk)
  if(TARGET troupe_sdk)  # in-tree builds: plugins include "platforms/..." paths
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
    # Installed into <libdir>/troupe/plugins: libtroupe_sdk is two levels up.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "troupe_plugin_${P_NAME}"
    LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIR}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  set(lib_file "libtroupe_plugin_${P_NAME}${CMAKE_SHARED_MODULE_SUFFIX}")
  set(manifest "{\n  \"name\": \"${P_NAME}\",\n  \"group\": \"${P_GROUP}\",\n  \"library\": \"${lib_file}\",\n  \"symbol\": \"troupe_plugin_entry\"\n}\n")
  file(WRITE "${P_OUTPUT_DIR}/${P_NAME}.troupe-plugin.json" "${manifest}")
  if(P_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${P_INSTALL_DIR}")
    install(FILES "${P_OUTPUT_DIR}/${P_NAME}.troupe-plugin.json" DESTINATION "${P_INSTALL_DIR}")
  endif()
endfunction()
