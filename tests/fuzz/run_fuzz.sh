#!/usr/bin/env bash
# Builds one libFuzzer target of a file reader with clang (ASan + UBSan),
# seeds a corpus and fuzzes briefly; any crash fails the test. Exit 77 =
# skipped (no clang or no libFuzzer runtime).
#   run_fuzz.sh gguf|safetensors SRC_DIR WORK_DIR [CLANGXX]
# GGUF_FUZZ_SECONDS / SAFETENSORS_FUZZ_SECONDS override the run time
# (defaults 20 and 15).
set -euo pipefail

name=$1
src=$2
work=$3
cxx=${4:-}

# What each target is made of: its sources, the headers it depends on, its
# seed generator, and seeds taken from a real file (seed_real, run in WORK_DIR).
case "$name" in
  gguf)
    seconds=${GGUF_FUZZ_SECONDS:-20}
    sources=("$src/tests/fuzz/gguf_fuzz.cpp" "$src/runtime/model_files/gguf/gguf_file.cpp" "$src/runtime/model_files/gguf/mapped_file.cpp")
    headers=("$src"/runtime/model_files/gguf/*.hpp)
    seed_headers=("$src/tests/runtime/model_files/gguf/gguf_writer.hpp")
    seed_real() {  # prefixes of the real model: its header, part of its vocabulary, its metadata and first tensors
      local stories="$src/tests/data/stories260K.gguf"
      if [[ -f "$stories" ]]; then
        for n in 64 1024 8192 16384 32768; do head -c "$n" "$stories" > "seeds/stories_$n.gguf"; done
      fi
    }
    ;;
  safetensors)
    seconds=${SAFETENSORS_FUZZ_SECONDS:-15}
    sources=("$src/tests/fuzz/safetensors_fuzz.cpp" "$src/runtime/model_files/safetensors/safetensors_file.cpp"
             "$src/runtime/model_files/gguf/mapped_file.cpp" "$src/runtime/text/json/json_io.cpp")
    headers=("$src"/runtime/model_files/safetensors/*.hpp "$src/runtime/model_files/gguf/mapped_file.hpp" "$src/runtime/text/json/json_io.hpp")
    seed_headers=("$src/tests/runtime/model_files/safetensors/safetensors_writer.hpp")
    seed_real() {  # the real MiniLM header when TROUPE_MINILM_DIR is set (its JSON, with the data cut off)
      local real="${TROUPE_MINILM_DIR:-}/model.safetensors"
      if [[ -n "${TROUPE_MINILM_DIR:-}" && -f "$real" ]]; then
        local n
        n=$(od -An -t u8 -N 8 "$real" | tr -d ' ')
        if [[ -n "$n" && "$n" -lt 60000 ]]; then head -c $((8 + n + 64)) "$real" > seeds/minilm_header.safetensors; fi
      fi
    }
    ;;
  *)
    echo "usage: run_fuzz.sh gguf|safetensors SRC_DIR WORK_DIR [CLANGXX]" >&2
    exit 2
    ;;
esac
sources+=("$src/sdk/status.cpp" "$src/sdk/dtype.cpp" "$src/sdk/quantization.cpp" "$src/sdk/ops.cpp")

if [[ -z "$cxx" || "$cxx" == *NOTFOUND* ]]; then
  cxx=$(command -v clang++-14 || command -v clang++ || true)
fi
if [[ -z "$cxx" ]]; then
  echo "SKIP: clang++ not found (install clang and libclang-rt-dev to run the $name fuzzer)"
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

deps=("${sources[@]}" "${headers[@]}" "$src/include/troupe/status.hpp" "$src/include/troupe/dtype.hpp"
      "$src/include/troupe/model.hpp" "$0")
flags=(-std=c++20 -g -O1 -I"$src/include" -I"$src")

stale() {  # stale OUTPUT INPUTS...: true when OUTPUT is missing or older than an input
  local out=$1; shift
  [[ -f "$out" ]] || return 0
  local f
  for f in "$@"; do [[ "$f" -nt "$out" ]] && return 0; done
  return 1
}

if stale "${name}_fuzz" "${deps[@]}"; then
  echo "building ${name}_fuzz with $cxx"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "${sources[@]}" -o "${name}_fuzz.tmp"
  mv "${name}_fuzz.tmp" "${name}_fuzz"
fi
if stale "${name}_seeds" "$src/tests/fuzz/${name}_seeds.cpp" "${seed_headers[@]}"; then
  "$cxx" "${flags[@]}" "$src/tests/fuzz/${name}_seeds.cpp" -o "${name}_seeds.tmp"
  mv "${name}_seeds.tmp" "${name}_seeds"
fi

# A fresh corpus every run: generated seeds plus seeds from a real file.
rm -rf seeds corpus artifacts
mkdir -p seeds corpus artifacts
"./${name}_seeds" seeds
seed_real

echo "fuzzing for ${seconds}s"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set +e
"./${name}_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -error_exitcode=1 \
  -dict="$src/tests/fuzz/${name}.dict" -artifact_prefix=artifacts/ -print_final_stats=1 \
  corpus seeds > fuzz.log 2>&1
rc=$?
set -e
tail -n 25 fuzz.log
if [[ $rc -ne 0 ]]; then
  echo "FAIL: ${name}_fuzz exited with $rc; reproducer(s) in $work/artifacts:"
  ls -l artifacts
  exit 1
fi
echo "PASS: no crash"
