#!/usr/bin/env python3
"""`troupe serve DIR` of a Hugging Face folder with the official OpenAI Python SDK:
the folder's generation_config.json defaults show in the answers, and
`--generation-config vllm` takes them away.

The folder holds a real model: SmolLM2-135M-Instruct (its Q4_1 GGUF made F32 by
llama.cpp's llama-quantize, exactly the same numbers) written by
`troupe make-gguf --from-gguf` with safetensors, config.json, tokenizer.json,
tokenizer_config.json and generation_config.json. The script writes the folder,
then, each against a `troupe serve DIR` it starts (the folder's file rewritten
for each) and one `troupe serve DIR --generation-config vllm`:
  - max_new_tokens 5: a greedy chat request without max_tokens gets the first 5
    tokens of the answer ("length"); without the defaults it answers in full;
  - eos_token_id [2, X], X a token of the greedy answer: generation stops at X
    ("stop"), the text a strict prefix of the full greedy answer;
  - top_k 1 (temperature 1.0): requests that set no sampling fields give the same
    text whatever their seed; without the defaults (temperature 1, no top-k) they differ;
  - repetition_penalty 1.3: the greedy answer changes;
  - the served name is the folder's path, as vLLM's default.

    SMOL=$(scripts/fetch-model.sh)
    ~/.cache/troupe/llama.cpp-11434/bin/llama-quantize --allow-requantize "$SMOL" /tmp/smollm2-f32.gguf F32
    python3 tests/apps/openai_sdk_folder.py build/bin/troupe /tmp/smollm2-f32.gguf [WORK_DIR]

Needs `pip install openai`. Exits non-zero on the first failure. Not part of ctest
(a real model and the SDK): tests/apps/generation_config_http_test.cpp holds the
same behaviour on a random-weights folder."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from openai import OpenAI

PROMPT = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
OPEN_PROMPT = [{"role": "user", "content": "Write a short story about a cat."}]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, troupe, folder, *flags):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([troupe, "serve", folder, "--port", str(self.port), "--max-model-len", "512",
                                      *flags], stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                sys.exit("troupe serve did not become healthy:\n" + self.log.read().decode(errors="replace")[-4000:])
            time.sleep(0.2)
        self.client = OpenAI(base_url=self.base + "/v1", api_key="none")
        self.model = self.client.models.list().data[0].id

    def chat(self, messages=PROMPT, **kw):
        r = self.client.chat.completions.create(model=self.model, messages=messages, **kw)
        c = r.choices[0]
        return c.message.content, c.finish_reason, r.usage.completion_tokens, (c.model_extra or {}).get("token_ids")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def with_defaults(troupe, folder, config, base):
    """A server on `folder` whose generation_config.json is `base` plus `config`."""
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({**base, **config}, f, indent=2)
    print(f"generation_config.json: {json.dumps({**base, **config})}")
    return Server(troupe, folder)


def show(label, answer):
    text, finish, tokens, _ = answer
    print(f"  {label:<28} {tokens:>3} tokens, {finish:<6} {text!r}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    troupe, gguf = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="troupe-sdk-folder-")
    folder = os.path.join(work, "SmolLM2-135M-Instruct")
    subprocess.run([troupe, "make-gguf", "--model-shape", "smollm2-135m", "--from-gguf", gguf, "--hf-folder", folder,
                    "--shards", "2"], check=True)
    with open(os.path.join(folder, "generation_config.json")) as f:
        base = json.load(f)  # bos/eos as the converter writes them
    print("folder:", folder, sorted(os.listdir(folder)))

    plain = Server(troupe, folder, "--generation-config", "vllm")
    assert plain.model == folder, plain.model  # vLLM's default served name: the path as given
    try:
        # max_new_tokens: the default max_tokens.
        full = plain.chat(temperature=0)
        show("vllm greedy (no defaults):", full)
        assert full[2] > 5 and full[1] == "stop", full
        s = with_defaults(troupe, folder, {"max_new_tokens": 5}, base)
        try:
            short = s.chat(temperature=0)
            show("auto, no max_tokens:", short)
            assert short[2] == 5 and short[1] == "length", short
            assert full[0].startswith(short[0]) and short[0] != full[0], (short, full)
        finally:
            s.stop()

        # eos_token_id list: stop at a token of the greedy answer.
        greedy = plain.chat(temperature=0, max_tokens=48, extra_body={"return_token_ids": True})
        show("vllm greedy:", greedy)
        ids = greedy[3]
        assert ids, "return_token_ids gave no ids"
        k = next(i for i in range(3, len(ids)) if ids[i] not in ids[:i])
        s = with_defaults(troupe, folder, {"eos_token_id": [base.get("eos_token_id", 2), ids[k]]}, base)
        try:
            stopped = s.chat(temperature=0, max_tokens=48)
            show(f"auto (eos also {ids[k]}):", stopped)
            assert stopped[1] == "stop" and stopped[2] <= k + 1, stopped
            assert greedy[0].startswith(stopped[0]) and len(stopped[0]) < len(greedy[0]), (stopped, greedy)
        finally:
            s.stop()

        # top_k 1: any seed gives the greedy text when the request sets no sampling fields.
        sampled = {plain.chat(OPEN_PROMPT, max_tokens=24, seed=seed)[0] for seed in (1, 2, 3)}
        print(f"  vllm, seeds 1-3:             {len(sampled)} different texts")
        assert len(sampled) > 1, sampled
        s = with_defaults(troupe, folder, {"top_k": 1, "temperature": 1.0}, base)
        try:
            texts = {s.chat(OPEN_PROMPT, max_tokens=24, seed=seed)[0] for seed in (1, 2, 3)}
            print(f"  auto, seeds 1-3:             {len(texts)} text: {next(iter(texts))!r}")
            assert len(texts) == 1, texts
            assert texts == {plain.chat(OPEN_PROMPT, max_tokens=24, temperature=0)[0]}, texts
        finally:
            s.stop()

        # repetition_penalty: the greedy answer changes.
        story = plain.chat(OPEN_PROMPT, max_tokens=48, temperature=0)
        show("vllm greedy:", story)
        s = with_defaults(troupe, folder, {"repetition_penalty": 1.3}, base)
        try:
            penalized = s.chat(OPEN_PROMPT, max_tokens=48, temperature=0)
            show("auto (repetition 1.3):", penalized)
            assert penalized[0] != story[0], penalized
            # The request's own field wins over the folder's.
            own = s.chat(OPEN_PROMPT, max_tokens=48, temperature=0, extra_body={"repetition_penalty": 1.0})
            assert own[0] == story[0], own
        finally:
            s.stop()
    finally:
        plain.stop()
    if len(sys.argv) <= 3:
        shutil.rmtree(work)
    print("ok")


if __name__ == "__main__":
    main()
