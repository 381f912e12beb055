#!/usr/bin/env bash
# Builds the GGUF libFuzzer target with clang (ASan + UBSan), seeds a corpus
# and fuzzes briefly; any crash fails the test. Exit 77 = skipped (no clang
# or no libFuzzer runtime). Usage: run_gguf_fuzz.sh SRC_DIR WORK_DIR [CLANGXX]
# GGUF_FUZZ_SECONDS overrides the run time (default 20).
set -euo pipefail

src=$1
work=$2
cxx=${3:-}
seconds=${GGUF_FUZZ_SECONDS:-20}

if [[ -z "$cxx" || "$cxx" == *NOTFOUND* ]]; then
  cxx=$(command -v clang++-14 || command -v clang++ || true)
fi
if [[ -z "$cxx" ]]; then
  echo "SKIP: clang++ not found (install clang and libclang-rt-dev to run the GGUF fuzzer)"
  exit 77
fi

mkdir -p "$work"
cd "$work"

# libFuzzer ships separately from clang on Debian (libclang-rt-*-dev).
if [[ ! -f probe.ok ]]; then
  printf '%s\n' '#include <cstdint>' '#include <cstddef>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' > probe.cpp
  if ! "$cxx" -fsanitize=fuzzer probe.cpp -o probe >probe.log 2>&1; then
    echo "SKIP: $cxx cannot link -fsanitize=fuzzer (libclang-rt-dev missing?):"
    cat probe.log
    exit 77
  fi
  touch probe.ok
fi

sources=(
  "$src/tests/fuzz/gguf_fuzz.cpp"
  "$src/runtime/gguf/gguf_file.cpp"
  "$src/runtime/gguf/mapped_file.cpp"
  "$src/sdk/status.cpp"
  "$src/sdk/dtype.cpp"
)
deps=("${sources[@]}" "$src"/runtime/gguf/*.hpp "$src/include/troupe/status.hpp"
      "$src/include/troupe/dtype.hpp" "$src/include/troupe/model.hpp" "$0")
flags=(-std=c++20 -g -O1 -I"$src/include" -I"$src")

stale() {  # stale OUTPUT INPUTS...: true when OUTPUT is missing or older than an input
  local out=$1; shift
  [[ -f "$out" ]] || return 0
  local f
  for f in "$@"; do [[ "$f" -nt "$out" ]] && return 0; done
  return 1
}

if stale gguf_fuzz "${deps[@]}"; then
  echo "building gguf_fuzz with $cxx"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "${sources[@]}" -o gguf_fuzz.tmp
  mv gguf_fuzz.tmp gguf_fuzz
fi
seed_deps=("$src/tests/fuzz/gguf_seeds.cpp" "$src/tests/runtime/gguf/gguf_writer.hpp")
if stale gguf_seeds "${seed_deps[@]}"; then
  "$cxx" "${flags[@]}" "$src/tests/fuzz/gguf_seeds.cpp" -o gguf_seeds.tmp
  mv gguf_seeds.tmp gguf_seeds
fi

# A fresh corpus every run: generated seeds plus prefixes of the real model
# (its header, part of its vocabulary, its whole metadata and first tensors).
rm -rf seeds corpus artifacts
mkdir -p seeds corpus artifacts
./gguf_seeds seeds
stories="$src/tests/data/stories260K.gguf"
if [[ -f "$stories" ]]; then
  for n in 64 1024 8192 16384 32768; do head -c "$n" "$stories" > "seeds/stories_$n.gguf"; done
fi

echo "fuzzing for ${seconds}s"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set +e
./gguf_fuzz -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -error_exitcode=1 \
  -dict="$src/tests/fuzz/gguf.dict" -artifact_prefix=artifacts/ -print_final_stats=1 \
  corpus seeds > fuzz.log 2>&1
rc=$?
set -e
tail -n 25 fuzz.log
if [[ $rc -ne 0 ]]; then
  echo "FAIL: gguf_fuzz exited with $rc; reproducer(s) in $work/artifacts:"
  ls -l artifacts
  exit 1
fi
echo "PASS: no crash"
