#!/usr/bin/env python3
"""Regenerates the llama.cpp references of the Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS
weight types (tests/golden/quant_types_golden_test.cpp):

  tests/data/quant/tiny-<FTYPE>.gguf      troupe's `tiny` random model (f32, seed 21)
                                          quantized by llama.cpp's llama-quantize to
                                          Q2_K, Q3_K_M, Q5_K_M, IQ4_NL and IQ4_XS: blocks
                                          written by llama.cpp, in its per-tensor mixes
  tests/data/golden/quant_types_llamacpp.json
                                          llama.cpp's greedy tokens (llama-server
                                          /completion, temperature 0, 2 threads, F16 KV
                                          cache) with per-step top-1/top-2 logit margins
                                          and the first step's top-8 logprobs, on those
                                          files and on `troupe make-gguf --model-shape tiny
                                          --weight-type T --seed 5` for each new type T
                                          (blocks written by troupe)

Usage: gen_quant_types_llamacpp.py TROUPE_BIN LLAMA_CPP_BIN_DIR
(e.g. build/bin/troupe ~/.cache/troupe/llama.cpp-11434/bin). Standard library only.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
QUANT_DIR = os.path.join(DATA, "quant")
OUT = os.path.join(HERE, "quant_types_llamacpp.json")

F32_SEED = 21
MADE_SEED = 5
LLAMA_FTYPES = ["Q2_K", "Q3_K_M", "Q5_K_M", "IQ4_NL", "IQ4_XS"]
TROUPE_TYPES = ["q2_k", "q3_k", "q5_k", "iq4_nl", "iq4_xs"]
PROMPTS = [[1, 72, 101, 108, 108, 111], [1, 300, 17, 400, 5], [1, 258, 259, 260, 261, 262, 263, 264],
           [1, 84, 104, 101, 32, 99, 97, 116], [1, 508, 340, 108, 365]]
N_PREDICT = 12
TOP_N = 8


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def llama_cases(server, model):
    port = free_port()
    proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-t", "2", "-c", "256", "-np", "1",
                             "--no-warmup", "-ngl", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama-server did not come up on " + model)
        cases = []
        for ids in PROMPTS:
            res = post(port, {"prompt": ids, "n_predict": N_PREDICT, "temperature": 0, "n_probs": TOP_N,
                              "ignore_eos": True, "cache_prompt": False})
            steps = res.get("completion_probabilities", [])
            if len(steps) != N_PREDICT:  # llama-server holds back probabilities of incomplete UTF-8
                print(f"{model}: prompt {ids}: no per-step probabilities, left out", file=sys.stderr)
                continue
            out_ids = [s["id"] for s in steps]
            margins = []
            for s in steps:
                top = s["top_logprobs"]
                margins.append(top[0]["logprob"] - top[1]["logprob"])
            first = [[t["id"], t["logprob"]] for t in steps[0]["top_logprobs"]]
            cases.append({"prompt": "ids " + " ".join(map(str, ids)), "prompt_ids": ids, "output_ids": out_ids, "top1_top2_logit_margin": margins,
                          "first_step_top_logprobs": first})
        if len(cases) < 2:
            raise RuntimeError(f"{model}: fewer than 2 prompts with probabilities")
        return cases
    finally:
        proc.terminate()
        proc.wait()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    troupe, bin_dir = sys.argv[1], os.path.expanduser(sys.argv[2])
    quantize, server = os.path.join(bin_dir, "llama-quantize"), os.path.join(bin_dir, "llama-server")
    os.makedirs(QUANT_DIR, exist_ok=True)
    models = []
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "tiny-f32.gguf")
        run([troupe, "make-gguf", "--model-shape", "tiny", "--weight-type", "f32", "--seed", str(F32_SEED), "-o", f32])
        for ftype in LLAMA_FTYPES:
            rel = f"quant/tiny-{ftype}.gguf"
            out = os.path.join(DATA, rel)
            run([quantize, f32, out, ftype, "2"])
            models.append({"name": f"llama-quantize {ftype}", "file": rel,
                           "cases": llama_cases(server, out)})
        for t in TROUPE_TYPES:
            made = os.path.join(tmp, f"tiny-{t}.gguf")
            run([troupe, "make-gguf", "--model-shape", "tiny", "--weight-type", t, "--seed", str(MADE_SEED), "-o",
                 made])
            models.append({"name": f"make-gguf {t}", "dummy": {"shape": "tiny", "weight_type": t, "seed": MADE_SEED},
                           "cases": llama_cases(server, made)})
    version = subprocess.run([server, "--version"], capture_output=True, text=True)
    doc = {"generator": "tests/data/golden/gen_quant_types_llamacpp.py",
           "llama_cpp": (version.stdout + version.stderr).strip().splitlines()[0:2],
           "f32_source": {"shape": "tiny", "weight_type": "f32", "seed": F32_SEED},
           "n_predict": N_PREDICT, "models": models}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
