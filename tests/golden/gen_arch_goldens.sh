#!/usr/bin/env bash
# Regenerates the references of arch_golden_test: greedy tokens and next-token
# log-probabilities on random-weight files of each architecture family that
# `troupe make-gguf` writes (fixed seed, few layers).
#
#   tests/golden/gen_arch_goldens.sh llama.cpp [TROUPE_BIN] [LLAMA_CPP_BIN_DIR]
#       -> tests/data/golden/arch_goldens_llamacpp.json (llama.cpp b11434's llama-server)
#   tests/golden/gen_arch_goldens.sh numpy [TROUPE_BIN]
#       -> tests/data/golden/arch_goldens_numpy.json (tests/golden/ref_forward.py: an
#          independent float64 forward pass; needs python3 with numpy)
#
# Defaults: build/bin/troupe and ~/.cache/troupe/llama.cpp-11434/bin.
# llama-server runs on the CPU with an f32 KV cache (-ctk/-ctv f32), so the only
# differences left to troupe are arithmetic order and activation rounding. Prompts are
# token ids (no tokenizer involved): a fixed pseudo-random sequence per case. The
# llama-3.2 long case puts its generated tokens past position 8192, where Llama 3's
# rope_freqs factors change the low-frequency pairs most.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
reference=${1:?usage: gen_arch_goldens.sh llama.cpp|numpy [TROUPE_BIN] [LLAMA_CPP_BIN_DIR]}
troupe=${2:-$here/build/bin/troupe}
llama_bin=${3:-$HOME/.cache/troupe/llama.cpp-11434/bin}
case $reference in
  llama.cpp) out=$here/tests/data/golden/arch_goldens_llamacpp.json ;;
  numpy) out=$here/tests/data/golden/arch_goldens_numpy.json ;;
  *) echo "unknown reference '$reference' (llama.cpp or numpy)" >&2; exit 2 ;;
esac
work=$(mktemp -d)
server_pid=
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=18231

# shape layers seed weight_type ctx  prompts(len:n_predict,...)
cases=(
  "qwen2.5-0.5b 2 7 q8_0 512 24:12,7:12"
  "qwen3-0.6b 2 7 q8_0 512 24:12,7:12"
  "phi3-mini 1 7 q8_0 512 24:12"
  "llama-3.2-1b 1 7 q8_0 8448 24:12,8200:8"
)

if [[ $reference == llama.cpp ]]; then
  echo '{"reference": "llama.cpp b11434 llama-server, CPU, f32 KV cache", "cases": [' > "$work/out.json"
else
  echo '{"reference": "tests/golden/ref_forward.py (numpy float64)", "cases": [' > "$work/out.json"
fi
first=1
for c in "${cases[@]}"; do
  read -r shape layers seed wtype ctx prompts <<<"$c"
  gguf=$work/$shape.gguf
  "$troupe" make-gguf --model-shape "$shape" --layers "$layers" --seed "$seed" --weight-type "$wtype" -o "$gguf" >&2
  if [[ $reference == numpy ]]; then
    python3 - "$here/tests/golden/ref_forward.py" "$gguf" "$shape" "$layers" "$seed" "$wtype" "$prompts" \
      "$work/case.json" <<'PY'
import json, subprocess, sys
ref, gguf, shape, layers, seed, wtype, prompts, dst = sys.argv[1:]
runs = []
for k, spec in enumerate(prompts.split(",")):
    n_prompt, n_predict = (int(x) for x in spec.split(":"))
    x = 12345 + 977 * k  # the same ids as the llama.cpp branch
    ids = []
    for _ in range(n_prompt):
        x = (1103515245 * x + 12345) % (1 << 31)
        ids.append(300 + x % 9700)
    out = subprocess.run([sys.executable, ref, gguf, json.dumps(ids), str(n_predict), "8"], check=True,
                         capture_output=True, text=True).stdout
    runs.append(json.loads(out))
json.dump({"shape": shape, "layers": int(layers), "seed": int(seed), "weight_type": wtype, "runs": runs},
          open(dst, "w"))
PY
    [[ $first == 1 ]] || echo ',' >> "$work/out.json"
    first=0
    cat "$work/case.json" >> "$work/out.json"
    rm -f "$gguf"
    echo "done: $shape" >&2
    continue
  fi
  "$llama_bin/llama-server" -m "$gguf" -c "$ctx" -b 512 -ub 512 -t 2 -np 1 -ngl 0 -ctk f32 -ctv f32 \
    --port "$port" --host 127.0.0.1 >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.5
  done
  python3 - "$port" "$shape" "$layers" "$seed" "$wtype" "$prompts" "$work/case.json" <<'PY'
import json, sys, urllib.request
port, shape, layers, seed, wtype, prompts, dst = sys.argv[1:]
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=3600))
props = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/props"))
n_vocab = None
runs = []
for k, spec in enumerate(prompts.split(",")):
    n_prompt, n_predict = (int(x) for x in spec.split(":"))
    # A fixed LCG over ids 300..9999 (plain synthetic-vocab tokens of every shape).
    x = 12345 + 977 * k
    ids = []
    for _ in range(n_prompt):
        x = (1103515245 * x + 12345) % (1 << 31)
        ids.append(300 + x % 9700)
    r = post("/completion", {"prompt": ids, "n_predict": n_predict, "temperature": 0.0, "top_k": 1,
                             "n_probs": 8, "cache_prompt": False, "ignore_eos": True, "return_tokens": True,
                             "post_sampling_probs": False, "samplers": ["top_k"]})
    steps = []
    for p in r["completion_probabilities"]:
        steps.append({"id": p["id"], "logprob": p["logprob"],
                      "top": [[t["id"], t["logprob"]] for t in p["top_logprobs"]]})
    runs.append({"prompt_ids": ids, "output_ids": [s["id"] for s in steps], "steps": steps})
json.dump({"shape": shape, "layers": int(layers), "seed": int(seed), "weight_type": wtype, "runs": runs},
          open(dst, "w"))
PY
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
  rm -f "$gguf"
  [[ $first == 1 ]] || echo ',' >> "$work/out.json"
  first=0
  cat "$work/case.json" >> "$work/out.json"
  echo "done: $shape" >&2
done
echo ']}' >> "$work/out.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump(d, open(sys.argv[2],"w"), separators=(",",":"))' \
  "$work/out.json" "$out"
echo "wrote $out" >&2
