# Which installed SDK headers (include/troupe, installed whole) the SDK
# fingerprint covers: every *.hpp at any depth, except the folders named here,
# each for its reason. Included by cmake/SdkFingerprint.cmake (the hash), the
# top-level CMakeLists (what the hash depends on) and tests/sdk/
# check_sdk_headers.cmake (nothing installed escapes both).
#
#   named_ops/     optional ops found by name (Ops::find_op): append-only by rule
#                  (a published name's signature never changes; a changed op gets a
#                  new name), so a new op rebuilds no plugin.
#   model_runner/  the model runner's headers: a static library a platform links into
#                  its own plugin (hidden symbols), never shared across the boundary.
#   routing/       routing policies for data parallel replicas: append-only by rule (a
#                  published type never changes; a changed one gets a new name), so a
#                  new policy interface rebuilds no plugin.
set(TROUPE_SDK_UNFINGERPRINTED_DIRS named_ops model_runner routing)

# troupe_sdk_excluded(<path relative to the SDK folder> <out var>): ON when the path is
# in one of the folders named above.
function(troupe_sdk_excluded path out_var)
  set(excluded OFF)
  foreach(d IN LISTS TROUPE_SDK_UNFINGERPRINTED_DIRS)
    string(FIND "${path}" "${d}/" at)
    if(at EQUAL 0)
      set(excluded ON)
    endif()
  endforeach()
  set(${out_var} ${excluded} PARENT_SCOPE)
endfunction()

# troupe_sdk_fingerprinted_headers(<sdk dir> <out var>): the covered headers, as paths
# relative to <sdk dir>, sorted; the generated sdk_fingerprint.hpp (the result) is left out.
function(troupe_sdk_fingerprinted_headers sdk_dir out_var)
  file(GLOB_RECURSE all RELATIVE "${sdk_dir}" "${sdk_dir}/*.hpp")
  set(kept)
  foreach(h IN LISTS all)
    troupe_sdk_excluded("${h}" excluded)
    if(NOT excluded AND NOT h STREQUAL "sdk_fingerprint.hpp")
      list(APPEND kept "${h}")
    endif()
  endforeach()
  list(SORT kept)
  set(${out_var} "${kept}" PARENT_SCOPE)
endfunction()
