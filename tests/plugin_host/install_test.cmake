# Run by ctest (plugin_host.install_and_build_example): install the build tree
# into a fresh prefix, build examples/gpt2_model against it as a third party
# would, then check that the installed troupe loads it.
foreach(v TROUPE_BUILD_DIR TROUPE_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
  set(step_err "${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("cmake --install" ${CMAKE_COMMAND} --install ${TROUPE_BUILD_DIR} --prefix ${prefix})
foreach(f bin/troupe include/troupe/plugin.hpp include/troupe/sdk_fingerprint.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
# A plugin built against the install must stamp the fingerprint the installed troupe checks
# (the gpt2_model load below shows it end to end).
file(READ ${prefix}/include/troupe/sdk_fingerprint.hpp installed_fp)
file(READ ${TROUPE_BUILD_DIR}/generated/troupe/sdk_fingerprint.hpp built_fp)
if(NOT installed_fp STREQUAL built_fp)
  message(FATAL_ERROR "the installed sdk_fingerprint.hpp differs from the build's:\n${installed_fp}\n${built_fp}")
endif()
file(GLOB cfg ${prefix}/lib*/cmake/troupe/troupeConfig.cmake ${prefix}/lib/*/cmake/troupe/troupeConfig.cmake)
if(NOT cfg)
  message(FATAL_ERROR "the install lacks troupeConfig.cmake")
endif()
file(GLOB cpu_manifest ${prefix}/lib*/troupe/plugins/cpu.troupe-plugin.json ${prefix}/lib/*/troupe/plugins/cpu.troupe-plugin.json)
if(NOT cpu_manifest)
  message(FATAL_ERROR "the install lacks the built-in cpu plugin")
endif()

set(example_build ${WORK_DIR}/gpt2_model_build)
run_step("configuring examples/gpt2_model against the install"
  ${CMAKE_COMMAND} -S ${TROUPE_SOURCE_DIR}/examples/gpt2_model -B ${example_build} -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release)
run_step("building examples/gpt2_model" ${CMAKE_COMMAND} --build ${example_build})
if(NOT EXISTS ${example_build}/plugins/gpt2_model.troupe-plugin.json)
  message(FATAL_ERROR "the standalone build wrote no manifest in ${example_build}/plugins")
endif()

run_step("installed troupe plugins --json"
  ${CMAKE_COMMAND} -E env --unset=TROUPE_PLUGINS --unset=TROUPE_BUILTIN_PLUGIN_DIR
  TROUPE_PLUGIN_PATH=${example_build}/plugins ${prefix}/bin/troupe plugins --json)
string(JSON n LENGTH "${step_out}" groups troupe.general_plugins)
set(found "")
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${step_out}" groups troupe.general_plugins ${i} name)
  string(JSON status GET "${step_out}" groups troupe.general_plugins ${i} status)
  if(name STREQUAL "gpt2_model")
    set(found "${status}")
  endif()
endforeach()
if(NOT found STREQUAL "loaded")
  message(FATAL_ERROR "gpt2_model is '${found}' in the installed troupe's report:\n${step_out}\n${step_err}")
endif()
string(JSON activated GET "${step_out}" platform activated)
if(NOT activated MATCHES "^(cpu|cuda)$")
  message(FATAL_ERROR "the installed troupe activated '${activated}', expected its built-in platform:\n${step_out}")
endif()
message(STATUS "installed troupe loaded the standalone gpt2_model; platform ${activated}")

# The standalone plugin's model runs in the installed troupe: a one-layer random GPT-2 file
# generates, and without the plugin the architecture is refused by name.
set(gpt2_file ${WORK_DIR}/gpt2-1layer.gguf)
run_step("installed troupe make-gguf --model-shape gpt2"
  ${prefix}/bin/troupe make-gguf --model-shape gpt2 --layers 1 --weight-type q8_0 --seed 7 -o ${gpt2_file})
run_step("installed troupe generate on the gpt2 file with the standalone plugin"
  ${CMAKE_COMMAND} -E env --unset=TROUPE_PLUGINS --unset=TROUPE_BUILTIN_PLUGIN_DIR --unset=TROUPE_DEVICE
  TROUPE_PLUGIN_PATH=${example_build}/plugins ${prefix}/bin/troupe generate ${gpt2_file} -p "Hello" -n 4 --json
  --device cpu --threads 2)
string(JSON n_generated LENGTH "${step_out}" token_ids)
if(NOT n_generated EQUAL 4)
  message(FATAL_ERROR "the gpt2 plugin model generated ${n_generated} tokens, expected 4:\n${step_out}\n${step_err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=TROUPE_PLUGINS --unset=TROUPE_PLUGIN_PATH
  --unset=TROUPE_BUILTIN_PLUGIN_DIR ${prefix}/bin/troupe generate ${gpt2_file} -p "Hello" -n 1 --device cpu
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "gpt2")
  message(FATAL_ERROR "without the plugin, the gpt2 file must be refused naming its architecture (${rc}):\n${err}")
endif()
file(REMOVE ${gpt2_file})

# The simulated accelerator, built against the install as a hardware vendor starts
# (docs/writing-a-platform-plugin.md), must pass the installed `troupe platform-check`,
# which finds stories260K and its goldens in the install's share/troupe/conformance.
set(sim_build ${WORK_DIR}/sim_accelerator_build)
run_step("configuring examples/sim_accelerator against the install"
  ${CMAKE_COMMAND} -S ${TROUPE_SOURCE_DIR}/examples/sim_accelerator -B ${sim_build} -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release)
run_step("building examples/sim_accelerator" ${CMAKE_COMMAND} --build ${sim_build})
run_step("installed troupe platform-check --platform sim"
  ${CMAKE_COMMAND} -E env --unset=TROUPE_PLUGINS --unset=TROUPE_BUILTIN_PLUGIN_DIR --unset=TROUPE_DEVICE
  TROUPE_PLUGIN_PATH=${sim_build}/plugins/sim ${prefix}/bin/troupe platform-check --platform sim --json --no-speed)
string(JSON passed GET "${step_out}" passed)
string(JSON platform GET "${step_out}" platform)
if(NOT passed OR NOT platform STREQUAL "sim")
  message(FATAL_ERROR "the standalone sim accelerator did not pass the installed platform-check:\n${step_out}")
endif()
message(STATUS "the standalone sim accelerator passed the installed troupe platform-check")

# The embedding API: build examples/embed_service against the same install and run it.
if(DEFINED MODEL)
  set(embed_build ${WORK_DIR}/embed_service_build)
  run_step("configuring examples/embed_service against the install"
    ${CMAKE_COMMAND} -S ${TROUPE_SOURCE_DIR}/examples/embed_service -B ${embed_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release)
  run_step("building examples/embed_service" ${CMAKE_COMMAND} --build ${embed_build})
  run_step("running the installed embed_service"
    ${CMAKE_COMMAND} -E env --unset=TROUPE_PLUGINS --unset=TROUPE_PLUGIN_PATH --unset=TROUPE_BUILTIN_PLUGIN_DIR
    ${embed_build}/embed_service ${MODEL})
  if(NOT step_out MATCHES "embed_service: OK")
    message(FATAL_ERROR "embed_service did not report OK:\n${step_out}\n${step_err}")
  endif()
  message(STATUS "embed_service built against the install ran: OK")
endif()
