# Run at build time by tests/plugin_host/CMakeLists.txt: copy the SDK headers
# (SDK_DIR) to DEST and add one virtual to Platform ahead of its others, keeping
# TROUPE_ABI_VERSION and every type size: the change a forgotten version bump
# lets through, which only the SDK fingerprint catches.
foreach(v SDK_DIR DEST)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "alter_sdk.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${DEST}")
# The whole tree: the fingerprint covers headers at any depth (cmake/SdkHeaders.cmake).
file(COPY "${SDK_DIR}/" DESTINATION "${DEST}" FILES_MATCHING PATTERN "*.hpp")
file(READ "${DEST}/platform.hpp" text)
set(anchor "  virtual ~Platform() = default;\n")
string(FIND "${text}" "${anchor}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "alter_sdk.cmake: '${anchor}' is no longer in platform.hpp: update the anchor")
endif()
# Every later slot of Platform moves down by one in a plugin built against this copy.
string(REPLACE "${anchor}" "${anchor}  virtual int added_without_a_version_bump() const { return 0; }\n" text "${text}")
file(WRITE "${DEST}/platform.hpp" "${text}")
