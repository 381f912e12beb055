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
# Defaults: build/bin/troupe and ~/.cache/troupe/llama.cpp-11434/bin. ONLY=shape,shape
# (or shape@type for one weight type of a shape) regenerates just those cases and merges
# them into the existing file. The mixture-of-experts shapes (tiny-qwen3moe, tiny-olmoe,
# tiny-mixtral, tiny-gpt-oss in f32 and mxfp4) take tests/golden/ref_moe.py for numpy; their
# router choices against llama.cpp are gen_moe_routes.sh's.
# llama-server runs on the CPU with an f32 KV cache (-ctk/-ctv f32), so the only
# differences left to troupe are arithmetic order and activation rounding. Prompts are
# token ids (no tokenizer involved): a fixed pseudo-random sequence per case. The
# llama-3.2 long case puts its generated tokens past position 8192, where Llama 3's
# rope_freqs factors change the low-frequency pairs most. The gemma and mistral prompts
# cross their sliding windows (gemma3-270m: 512 on 5 of its 6 layers; gemma2-2b: 4096 on
# layer 0 of 2; mistral-7b-v0.1: 4096 on its layer). llama.cpp b11434 does not read a
# window under arch llama (src/models/llama.cpp never asks for attention.sliding_window),
# so the mistral case is referenced by numpy only. gpt2 (GPT-2 124M's shape, 2 layers) is
# the model of the example plugin examples/gpt2_model; its 900-token prompt
# reaches far into the 1024 learned positions, and its "text:N" run starts from an English
# prompt that llama.cpp tokenizes (recorded as prompt_text and prompt_ids; llama.cpp's
# reference only), so that `troupe generate` on the text is checked too (gpt2_plugin_test).
# phi3.5-mini carries Phi-3's long-context
# RoPE (rope_factors_long/short, original context 4096): llama.cpp runs the long set because
# its context (-c 4608) exceeds 4096, and the 4300-token prompt puts positions past 4096,
# where the long and short sets rotate the low-frequency pairs furthest apart (ref_forward.py
# gets the context as REF_CONTEXT and picks the set as llama.cpp does).
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

# shape layers seed weight_type ctx prompts(len:n_predict or text:n_predict,...) references(both|llama.cpp|numpy)
cases=(
  "qwen2.5-0.5b 2 7 q8_0 512 24:12,7:12 both"
  "qwen3-0.6b 2 7 q8_0 512 24:12,7:12 both"
  "phi3-mini 1 7 q8_0 512 24:12 both"
  "llama-3.2-1b 1 7 q8_0 8448 24:12,8200:8 both"
  "gemma3-270m 6 7 q8_0 1024 24:8,700:8 both"
  "gemma2-2b 2 7 q8_0 4608 24:8,4300:4 both"
  "mistral-7b-v0.1 1 7 q8_0 8448 24:8,8200:4 numpy"
  "gpt2 2 7 q8_0 1024 24:12,900:8,text:16 both"
  "phi3.5-mini 1 7 q8_0 4608 24:8,4300:4 both"
  # Mixtures of experts (ref_moe.py): f32 files, so that both references route every token
  # as troupe does (quantized activations could move a near-tied router logit); the
  # gpt-oss prompts cross its 4-token windows and YaRN's 64-token original context.
  "tiny-qwen3moe 2 7 f32 512 24:12,7:12 both"
  "tiny-olmoe 2 7 f32 512 24:12,7:12 both"
  "tiny-mixtral 2 7 f32 512 24:12,7:12 both"
  "tiny-gpt-oss 2 7 f32 512 24:12,100:8 both"
  "tiny-gpt-oss 2 7 mxfp4 512 24:12,100:8 both"
)

if [[ $reference == llama.cpp ]]; then
  echo '{"reference": "llama.cpp b11434 llama-server, CPU, f32 KV cache", "cases": [' > "$work/out.json"
else
  echo '{"reference": "tests/golden/ref_forward.py (numpy float64)", "cases": [' > "$work/out.json"
fi
first=1
for c in "${cases[@]}"; do
  read -r shape layers seed wtype ctx prompts refs <<<"$c"
  [[ $refs == both || $refs == "$reference" ]] || continue
  if [[ -n ${ONLY:-} && ",$ONLY," != *",$shape,"* && ",$ONLY," != *",$shape@$wtype,"* ]]; then continue; fi
  gguf=$work/$shape.gguf
  "$troupe" make-gguf --model-shape "$shape" --layers "$layers" --seed "$seed" --weight-type "$wtype" -o "$gguf" >&2
  if [[ $reference == numpy ]]; then
    ref=$here/tests/golden/ref_forward.py
    [[ $shape == *moe* || $shape == *mixtral* || $shape == *gpt-oss* ]] && ref=$here/tests/golden/ref_moe.py
    REF_CONTEXT=$ctx python3 - "$ref" "$gguf" "$shape" "$layers" "$seed" "$wtype" \
      "$prompts" "$work/case.json" <<'PY'
import json, os, subprocess, sys
ref, gguf, shape, layers, seed, wtype, prompts, dst = sys.argv[1:]
sys.path.insert(0, os.path.dirname(ref))
from ref_forward import Gguf
n_vocab = Gguf(gguf).tensors["token_embd.weight"][0][1]
span = min(9700, n_vocab - 316)  # plain tokens of the synthetic vocabulary (small test shapes: fewer)
runs = []
for k, spec in enumerate(prompts.split(",")):
    if spec.startswith("text:"):
        continue  # a text prompt needs llama.cpp's tokenizer: llama.cpp references only
    n_prompt, n_predict = (int(x) for x in spec.split(":"))
    x = 12345 + 977 * k  # the same ids as the llama.cpp branch
    ids = []
    for _ in range(n_prompt):
        x = (1103515245 * x + 12345) % (1 << 31)
        ids.append(300 + x % span)
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
  # --no-repack: b11434's AMX repacking dies (SIGSEGV / illegal tileloadd) on some Xeons
  # (the MXFP4 files here); it changes the layout llama.cpp computes from, not the maths.
  "$llama_bin/llama-server" -m "$gguf" -c "$ctx" -b 512 -ub 512 -t 2 -np 1 -ngl 0 -ctk f32 -ctv f32 --no-repack \
    --port "$port" --host 127.0.0.1 >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.5
  done
  python3 - "$port" "$shape" "$layers" "$seed" "$wtype" "$prompts" "$work/case.json" "$gguf" "$here/tests/golden" <<'PY'
import json, sys, urllib.request
port, shape, layers, seed, wtype, prompts, dst, gguf, golden_dir = sys.argv[1:]
sys.path.insert(0, golden_dir)
from ref_forward import Gguf

# llama-server leaves out the probabilities of a token after which its text ends in a cut
# UTF-8 sequence (server-context.cpp process_token: add_token only when the text is
# complete; validate_utf8 checks the last 4 bytes). Decode the file's byte-level tokens to
# know which generated tokens those are: their steps are recorded as null.
g = Gguf(gguf)
vocab, types = g.kv["tokenizer.ggml.tokens"], g.kv["tokenizer.ggml.token_type"]
printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
char_to_byte, n = {chr(b): b for b in printable}, 0
for b in range(256):
    if b not in printable:
        char_to_byte[chr(256 + n)] = b
        n += 1
def piece(tok):  # control tokens render as nothing (llama-server's default: no special text)
    return b"" if types[tok] == 3 else bytes(char_to_byte[c] for c in vocab[tok])
def complete(text):  # llama.cpp's validate_utf8(text) == len(text)
    for i in range(1, min(4, len(text)) + 1):
        c = text[-i]
        if (c & 0xE0 == 0xC0 and i < 2) or (c & 0xF0 == 0xE0 and i < 3) or (c & 0xF8 == 0xF0 and i < 4):
            return False
    return True

def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=3600))
props = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/props"))
span = min(9700, len(vocab) - 316)  # plain tokens of the synthetic vocabulary (small test shapes: fewer)
n_vocab = None
runs = []
# The text of a "text:N" run: GPT-2's pre-tokenizer splits contractions, digits, runs of
# spaces and punctuation.
TEXT = "Hello world! It's 2026, and GPT-2's tokenizer splits   spaces, numbers like 12345 and words."
for k, spec in enumerate(prompts.split(",")):
    first, n_predict = spec.split(":")
    n_predict = int(n_predict)
    prompt_text = None
    if first == "text":
        prompt_text = TEXT
        ids = post("/tokenize", {"content": prompt_text, "add_special": True, "parse_special": False})["tokens"]
    else:
        # A fixed LCG over ids 300..9999 (plain synthetic-vocab tokens of every shape; fewer for small vocabularies).
        x = 12345 + 977 * k
        ids = []
        for _ in range(int(first)):
            x = (1103515245 * x + 12345) % (1 << 31)
            ids.append(300 + x % span)
    r = post("/completion", {"prompt": ids, "n_predict": n_predict, "temperature": 0.0, "top_k": 1,
                             "n_probs": 8, "cache_prompt": False, "ignore_eos": True, "return_tokens": True,
                             "post_sampling_probs": False, "samplers": ["top_k"]})
    probs, tokens = r["completion_probabilities"], r["tokens"]
    steps, text, j = [], b"", 0
    for tok in tokens:
        text += piece(tok)
        if not complete(text):
            steps.append(None)
            continue
        p = probs[j]
        j += 1
        assert p["id"] == tok, (p["id"], tok)
        steps.append({"id": p["id"], "logprob": p["logprob"],
                      "top": [[t["id"], t["logprob"]] for t in p["top_logprobs"]]})
    assert j == len(probs) and len(tokens) == n_predict, (j, len(probs), len(tokens))
    run = {"prompt_ids": ids, "output_ids": tokens, "steps": steps}
    if prompt_text is not None:
        run["prompt_text"] = prompt_text
    runs.append(run)
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
python3 - "$work/out.json" "$out" "${ONLY:-}" <<'PY'
import json, os, sys
new, dst, only = sys.argv[1:]
d = json.load(open(new))
if only and os.path.exists(dst):  # keep the cases not regenerated, in their order
    old = json.load(open(dst))
    key = lambda c: (c["shape"], c["weight_type"])
    fresh = {key(c): c for c in d["cases"]}
    cases = [fresh.pop(key(c), c) for c in old["cases"]]
    d["cases"] = cases + list(fresh.values())
json.dump(d, open(dst, "w"), separators=(",", ":"))
PY
echo "wrote $out" >&2
