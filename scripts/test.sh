#!/usr/bin/env bash
# Run every test: dependencies, configure, build, ctest (CPU; GPU tests skip
# themselves when no GPU is present).
#   scripts/test.sh            build in ./build and run all tests
#   BUILD_DIR=... JOBS=... scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

scripts/install-deps.sh

# The default model (SmolLM2-135M-Instruct) for the tests that need a real chat model.
export TROUPE_TEST_MODEL=${TROUPE_TEST_MODEL:-$(scripts/fetch-model.sh)}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gpu
