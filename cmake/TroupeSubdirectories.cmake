# troupe_add_all_subdirectories(): add every direct subfolder that has a
# CMakeLists.txt, so a new concern (runtime/foo, tests/foo, bench/foo, an
# example) plugs in without editing its parent. A macro, so the subfolders
# see the caller's variables as with a plain add_subdirectory().
macro(troupe_add_all_subdirectories)
  file(GLOB _troupe_subdirs LIST_DIRECTORIES true "${CMAKE_CURRENT_SOURCE_DIR}/*")
  foreach(_troupe_dir ${_troupe_subdirs})
    if(IS_DIRECTORY ${_troupe_dir} AND EXISTS ${_troupe_dir}/CMakeLists.txt)
      add_subdirectory(${_troupe_dir})
    endif()
  endforeach()
endmacro()
