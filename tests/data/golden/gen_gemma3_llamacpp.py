#!/usr/bin/env python3
"""Greedy references of llama.cpp's llama-server on a Gemma 3 GGUF (default: the
gemma-3-270m Q4_K_M file of scripts/fetch-model.sh) -> JSON for the golden tests.

Prompts are tokenized by llama-server (/tokenize, add_special) and generated from
those token ids (/completion with an id list), so the reference does not depend on
troupe's tokenizer. Two prompts are longer than the 512-token sliding window (one
crosses it in the prefill, one during decoding). Per step the top-1/top-2 log-prob
margin is recorded (logit units: softmax keeps differences).

usage: gen_gemma3_llamacpp.py [--server BIN] [--model GGUF] [--out JSON]
"""
import argparse, hashlib, json, os, socket, subprocess, sys, time, urllib.request

HOME = os.path.expanduser("~")
DEFAULT_SERVER = f"{HOME}/.cache/troupe/llama.cpp-11434/bin/llama-server"
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
    near_window = "".join(FACTS for _ in range(7))                        # crosses it while decoding
    return [
        ("The capital of France is", 32),
        ("Here is a short story about a robot who learns to paint:", 48),
        ("def fibonacci(n):", 40),
        (long_story + "\nQuestion: how many steps did the keeper climb?\nAnswer:", 32),
        (near_window + "\nList three of the facts above:\n1.", 96),
    ]

def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=DEFAULT_SERVER)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "gemma3_270m_llamacpp.json"))
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([a.server, "-m", a.model, "--port", str(port), "-c", "4096", "-np", "1", "-t", a.threads,
                            "-b", "2048", "-ub", "512", "--no-webui"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.5)
        else:
            sys.exit("llama-server did not come up")
        cases = []
        for text, n in prompts():
            ids = post(port, "/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]
            r = post(port, "/completion", {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1,
                                           "cache_prompt": False, "ignore_eos": True, "n_probs": 2,
                                           "post_sampling_probs": False, "return_tokens": True})
            steps = r["completion_probabilities"]
            out = [st["id"] for st in steps]
            margins = [st["top_logprobs"][0]["logprob"] - st["top_logprobs"][1]["logprob"] for st in steps]
            cases.append({"prompt": text, "prompt_ids": ids, "n_predict": n, "output_ids": out,
                          "output_text": r["content"], "top1_top2_logit_margin": margins})
            print(f"{len(ids)} prompt tokens -> {out[:8]}... min margin {min(margins):.4f}", file=sys.stderr)
        with open(a.model, "rb") as f:
            sha = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sha.update(chunk)
        meta = {"model_file": os.path.basename(a.model), "model_sha256": sha.hexdigest(),
                "llama_cpp": "b11434 llama-server (CPU), " + a.threads + " threads, n_ctx 4096, n_batch 2048, "
                             "n_ubatch 512, default F16 KV cache, one slot, prompt cache off",
                "generation": "greedy (temperature 0, top_k 1), EOS ignored, prompt given as token ids from "
                              "/tokenize (add_special, parse_special)",
                "fragility": "top1_top2_logit_margin per generated step (log-prob difference = logit difference)",
                "generator": "tests/data/golden/gen_gemma3_llamacpp.py"}
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "cases": cases}, f, indent=1)
            f.write("\n")
    finally:
        srv.terminate()
        srv.wait()

if __name__ == "__main__":
    main()
