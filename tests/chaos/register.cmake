# NOT registered yet (docs/parallelism.md, "The chaos harness"): the 30-minute run showed a
# surviving node's RSS staying ~65 MiB above its baseline after TP world rebuilds, which
# fails the resources invariant. This file is not named CMakeLists.txt so that
# troupe_add_all_subdirectories() does not pick it up; rename it once that is fixed and
# it has passed repeatedly. Never register it flaky.
#
# The chaos harness (chaos.py; README in its docstring), five minutes of it: a head with
# TP=2 over two nodes in network namespaces plus a second node, streaming clients, and
# kill -9, SIGSTOP, a link down, a stalled link, a burst of 2,000 idle connections, a
# crafted frame and a handshake flood at random, with every invariant checked. Root and
# iproute2 only; it skips (77) saying why otherwise. Alone on the machine: its faults
# have deadlines. The 30-minute run is `tests/chaos/chaos.py --minutes 30` by hand.
if(TARGET troupe AND TARGET troupe_platform_cpu)
  add_test(NAME Chaos.FiveMinutes
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/chaos.py --troupe $<TARGET_FILE:troupe>
                   --model ${PROJECT_SOURCE_DIR}/tests/data/stories260K.gguf --minutes 5 --clients 16)
  set_tests_properties(Chaos.FiveMinutes PROPERTIES LABELS "integration;netns" SKIP_RETURN_CODE 77 TIMEOUT 1200
                       RUN_SERIAL TRUE)
endif()
