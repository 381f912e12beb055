#!/usr/bin/env bash
# Builds the safetensors libFuzzer target with clang (ASan + UBSan), seeds a
# corpus and fuzzes briefly; any crash fails the test. Exit 77 = skipped (no
# clang or no libFuzzer runtime). Usage: run_safetensors_fuzz.sh SRC_DIR WORK_DIR [CLANGXX]
# SAFETENSORS_FUZZ_SECONDS overrides the run time (default 15).
set -euo pipefail

src=$1
work=$2
cxx=${3:-}
seconds=${SAFETENSORS_FUZZ_SECONDS:-15}

if [[ -z "$cxx" || "$cxx" == *NOTFOUND* ]]; then
  cxx=$(command -v clang++-14 || command -v clang++ || true)
fi
if [[ -z "$cxx" ]]; then
  echo "SKIP: clang++ not found (install clang and libclang-rt-dev to run the safetensors fuzzer)"
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
  "$src/tests/fuzz/safetensors_fuzz.cpp"
  "$src/runtime/safetensors/safetensors_file.cpp"
  "$src/runtime/gguf/mapped_file.cpp"
  "$src/runtime/json/json_io.cpp"
  "$src/sdk/status.cpp"
  "$src/sdk/dtype.cpp"
)
deps=("${sources[@]}" "$src"/runtime/safetensors/*.hpp "$src/runtime/gguf/mapped_file.hpp" "$src/runtime/json/json_io.hpp"
      "$src/include/troupe/status.hpp" "$src/include/troupe/dtype.hpp" "$src/include/troupe/model.hpp" "$0")
flags=(-std=c++20 -g -O1 -I"$src/include" -I"$src")

stale() {  # stale OUTPUT INPUTS...: true when OUTPUT is missing or older than an input
  local out=$1; shift
  [[ -f "$out" ]] || return 0
  local f
  for f in "$@"; do [[ "$f" -nt "$out" ]] && return 0; done
  return 1
}

if stale safetensors_fuzz "${deps[@]}"; then
  echo "building safetensors_fuzz with $cxx"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "${sources[@]}" -o safetensors_fuzz.tmp
  mv safetensors_fuzz.tmp safetensors_fuzz
fi
seed_deps=("$src/tests/fuzz/safetensors_seeds.cpp" "$src/tests/runtime/safetensors/safetensors_writer.hpp")
if stale safetensors_seeds "${seed_deps[@]}"; then
  "$cxx" "${flags[@]}" "$src/tests/fuzz/safetensors_seeds.cpp" -o safetensors_seeds.tmp
  mv safetensors_seeds.tmp safetensors_seeds
fi

# A fresh corpus every run: generated seeds, plus the real MiniLM header when
# TROUPE_MINILM_DIR is set (its JSON, with the data cut off).
rm -rf seeds corpus artifacts
mkdir -p seeds corpus artifacts
./safetensors_seeds seeds
real="${TROUPE_MINILM_DIR:-}/model.safetensors"
if [[ -n "${TROUPE_MINILM_DIR:-}" && -f "$real" ]]; then
  n=$(od -An -t u8 -N 8 "$real" | tr -d ' ')
  if [[ -n "$n" && "$n" -lt 60000 ]]; then head -c $((8 + n + 64)) "$real" > seeds/minilm_header.safetensors; fi
fi

echo "fuzzing for ${seconds}s"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set +e
./safetensors_fuzz -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -error_exitcode=1 \
  -dict="$src/tests/fuzz/safetensors.dict" -artifact_prefix=artifacts/ -print_final_stats=1 \
  corpus seeds > fuzz.log 2>&1
rc=$?
set -e
tail -n 25 fuzz.log
if [[ $rc -ne 0 ]]; then
  echo "FAIL: safetensors_fuzz exited with $rc; reproducer(s) in $work/artifacts:"
  ls -l artifacts
  exit 1
fi
echo "PASS: no crash"
