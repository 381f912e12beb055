#!/usr/bin/env bash
# MaskBench's method on troupe's grammar engine (troupe_bench_maskbench), on the
# splits this work may use only: extracts them from a guidance-ai/jsonschemabench
# git directory into a temporary folder (one wildcard per allowed split, so no
# other split is ever written out), fetches Llama 3's vocabulary and runs.
#   bench/structured/maskbench.sh JSONSCHEMABENCH_GIT_DIR [BUILD_DIR] [-- extra troupe_bench_maskbench flags]
set -euo pipefail
repo=${1:?the jsonschemabench git directory}
build=${2:-build}
shift $(( $# >= 2 ? 2 : 1 ))
[[ ${1:-} == -- ]] && shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab_dir=$("$root/scripts/fetch-vocab.sh")
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
splits=(Github_trivial Github_easy Github_medium Github_hard Glaiveai2K Synthesized Handwritten JME)
patterns=()
for s in "${splits[@]}"; do patterns+=("maskbench/data/$s*"); done
git -C "$repo" archive HEAD "${patterns[@]}" | tar -x -C "$data"
nice -n 10 "$build/bin/troupe_bench_maskbench" --vocab "$vocab_dir/ggml-vocab-llama-bpe.gguf" \
  --data "$data/maskbench/data" "$@"
