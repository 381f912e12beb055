# troupe_include_root(<layer> <out-var>): a folder in the build tree that holds
# only a link named <layer> to the source folder <layer>. A library exports that
# folder instead of the repository's root, so its users resolve "<layer>/..."
# includes and nothing else: a layer that includes a layer it does not link
# fails to compile, which is what scripts/check-layering.sh also checks.
function(troupe_include_root layer out_var)
  set(root ${CMAKE_BINARY_DIR}/include_roots/${layer})
  if(NOT EXISTS ${root}/${layer})
    file(MAKE_DIRECTORY ${root})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${root}/${layer} SYMBOLIC)
  endif()
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()
