#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, fetch the
# default model and serve it on http://127.0.0.1:8000. TROUPE_HOST and
# TROUPE_PORT change the address; extra args go to `troupe serve`
# (e.g. --max-num-seqs 64).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/install-deps.sh
model=$(scripts/fetch-model.sh)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target troupe troupe_platform_cpu
exec "$build/bin/troupe" serve "$model" --host "${TROUPE_HOST:-127.0.0.1}" --port "${TROUPE_PORT:-8000}" "$@"
