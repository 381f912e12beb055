# The SDK fingerprint covers every installed SDK header (ctest sdk_headers_fingerprinted):
#   cmake -DSDK_DIR=<include/troupe> -DFINGERPRINT_HEADER=<generated sdk_fingerprint.hpp>
#         -DWORK_DIR=<scratch folder> -P check_sdk_headers.cmake
# Install.cmake installs include/troupe whole, so every file there must be a *.hpp
# the fingerprint hashes or one under a folder cmake/SdkHeaders.cmake names; and the
# build's generated header must list exactly the headers the rule gives now. Then, on a
# scratch copy, it shows the rule bites: a header added in a new subfolder changes the
# fingerprint, and a stray non-.hpp file is reported.
foreach(v SDK_DIR FINGERPRINT_HEADER WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_sdk_headers.cmake: -D${v}=... is required")
  endif()
endforeach()
get_filename_component(here "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
set(cmake_dir "${here}/../../cmake")
include("${cmake_dir}/SdkHeaders.cmake")

# problems_in(<dir> <out var>): the files under <dir> that the fingerprint does not cover.
function(problems_in dir out_var)
  troupe_sdk_fingerprinted_headers("${dir}" covered)
  file(GLOB_RECURSE installed RELATIVE "${dir}" "${dir}/*")
  set(problems)
  foreach(f IN LISTS installed)
    if(f STREQUAL "sdk_fingerprint.hpp")
      continue()
    endif()
    troupe_sdk_excluded("${f}" excluded)
    list(FIND covered "${f}" at)
    if(at EQUAL -1 AND NOT excluded)
      list(APPEND problems "${f}")
    endif()
  endforeach()
  set(${out_var} "${problems}" PARENT_SCOPE)
endfunction()

function(fingerprint_of dir out_var)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSDK_DIR=${dir} -DOUTPUT=${WORK_DIR}/fp.hpp
                          -P "${cmake_dir}/SdkFingerprint.cmake" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "SdkFingerprint.cmake failed on ${dir}")
  endif()
  file(STRINGS "${WORK_DIR}/fp.hpp" line REGEX "define TROUPE_SDK_FINGERPRINT ")
  set(${out_var} "${line}" PARENT_SCOPE)
endfunction()

# 1. The real SDK.
problems_in("${SDK_DIR}" problems)
if(problems)
  message(FATAL_ERROR "installed SDK files outside the fingerprint (make them .hpp headers, or name their "
                      "folder in cmake/SdkHeaders.cmake with its reason): ${problems}")
endif()
troupe_sdk_fingerprinted_headers("${SDK_DIR}" covered)
string(REPLACE ";" " " covered_text "${covered}")
file(STRINGS "${FINGERPRINT_HEADER}" listed REGEX "define TROUPE_SDK_FINGERPRINT_HEADERS ")
string(REGEX REPLACE ".*HEADERS \"(.*)\"$" "\\1" listed "${listed}")
if(NOT listed STREQUAL covered_text)
  message(FATAL_ERROR "the build's fingerprint hashed [${listed}], the rule gives [${covered_text}]: rebuild")
endif()

# 2. The rule bites, on a copy.
set(copy "${WORK_DIR}/sdk")
file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${SDK_DIR}/" DESTINATION "${copy}")
fingerprint_of("${copy}" before)
file(WRITE "${copy}/newfolder/moved.hpp" "#pragma once\nstruct MovedIntoASubfolder { int x; };\n")
fingerprint_of("${copy}" after)
if(before STREQUAL after)
  message(FATAL_ERROR "a header in a new subfolder left the fingerprint as it was (${before})")
endif()
file(WRITE "${copy}/stray.h" "#pragma once\n")
problems_in("${copy}" problems)
if(NOT problems STREQUAL "stray.h")
  message(FATAL_ERROR "a stray stray.h in the SDK was not reported (reported: [${problems}])")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
list(LENGTH covered n)
message(STATUS "sdk headers: ok (${n} fingerprinted: ${covered_text}; excluded folders: ${TROUPE_SDK_UNFINGERPRINTED_DIRS})")
