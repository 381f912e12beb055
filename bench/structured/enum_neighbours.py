#!/usr/bin/env python3
"""How much one heavy structured-output request slows a plain neighbour
(issue 25: no more than 2x; issue 43: no more than 1.25x). Starts `troupe serve`
on loopback, times a plain greedy completion alone, beside a free request of
the heavy one's length (the cost of sharing the batch at all), and beside the
heavy request, alternating, and prints the ratios of medians: beside heavy /
alone, and beside heavy / beside free (the grammar's own cost). Heavy requests
(--heavy):
  enum       a json_schema whose array items are an N-value enum (eight picks);
  wordcount  a string of at most 200 words (`^(?:\S+\s+){0,199}\S+$`) and at most
             --max-length characters, the pattern family whose lexer states multiply.
A heavy mask that goes over its limit fails that request alone (its error is printed).

  bench/structured/enum_neighbours.py [--troupe build/bin/troupe] [--model GGUF] [--heavy enum,wordcount]
                                      [--values 69000] [--max-length 1500] [--rounds 3] [--tokens 64]
"""
import argparse, json, os, re, socket, statistics, subprocess, sys, threading, time, urllib.error, urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def post(port, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read() or b"{}")

def heavy_request(kind, a, seed):
    if kind == "enum":
        values = [f"value-{i:06d}-of-the-enum" for i in range(a.values)]
        # Eight picks, so the enum is masked for as long as the plain request runs.
        schema = {"type": "object", "additionalProperties": False, "required": ["picks"],
                  "properties": {"picks": {"type": "array", "items": {"enum": values}, "minItems": 8,
                                           "maxItems": 8}}}
        def valid(v):
            return len(v["picks"]) == 8 and all(p in set(values) for p in v["picks"])
    else:
        pattern = r"^(?:\S+\s+){0,199}\S+$"
        schema = {"type": "object", "additionalProperties": False, "required": ["text"],
                  "properties": {"text": {"type": "string", "pattern": pattern, "maxLength": a.max_length}}}
        def valid(v):
            return re.search(pattern, v["text"]) is not None and len(v["text"]) <= a.max_length
    body = {"prompt": "Write:", "max_tokens": 4 * a.tokens, "temperature": 1.0, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": kind, "schema": schema}}}
    return body, valid

def outcome(h, valid):
    if "error" in h:
        return "error: " + h["error"].get("message", "")[:160]
    c = h["choices"][0]
    try:
        ok = valid(json.loads(c["text"]))
    except Exception:
        ok = False
    return f"valid={ok} finish={c['finish_reason']} tokens={h['usage']['completion_tokens']}"

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", default=os.path.join(root, "build/bin/troupe"))
    ap.add_argument("--model", default=os.environ.get("TROUPE_TEST_MODEL", ""))
    ap.add_argument("--heavy", default="enum,wordcount")
    ap.add_argument("--values", type=int, default=69000)
    ap.add_argument("--max-length", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    if not a.model:
        a.model = subprocess.run([os.path.join(root, "scripts/fetch-model.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip()
    port = free_port()
    server = subprocess.Popen([a.troupe, "serve", a.model, "--port", str(port), "--max-body-bytes", str(8 << 20)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1); break
            except Exception:
                time.sleep(0.2)
        plain = {"prompt": "Once upon a time", "max_tokens": a.tokens, "temperature": 0, "ignore_eos": True}
        post(port, plain)  # warm-up
        for kind in a.heavy.split(","):
            heavy, valid = heavy_request(kind, a, 1)
            body_mb = len(json.dumps(heavy)) / 1e6
            # The same prompt and length without a constraint (it runs to max_tokens).
            free = {"prompt": heavy["prompt"], "max_tokens": heavy["max_tokens"], "temperature": 1.0,
                    "ignore_eos": True}
            alone, beside, beside_free, heavy_done = [], [], [], []

            def next_to(body, out, keep=None):
                th = threading.Thread(target=lambda: (keep if keep is not None else []).append(post(port, body)))
                th.start(); time.sleep(0.3)  # admitted and running first
                t = time.monotonic(); post(port, plain); out.append(time.monotonic() - t)
                th.join()
            for r in range(a.rounds):
                t = time.monotonic(); post(port, plain); alone.append(time.monotonic() - t)
                next_to(dict(free, seed=r + 1), beside_free)
                next_to(dict(heavy, seed=r + 1), beside, heavy_done)
            ratio = statistics.median(beside) / statistics.median(alone)
            own = statistics.median(beside) / statistics.median(beside_free)
            what = f"enum of {a.values} values" if kind == "enum" else f"word-count pattern, maxLength {a.max_length}"
            print(f"{kind}: {what} ({body_mb:.2f} MB body); plain request of {a.tokens} tokens, {a.rounds} rounds")
            print(f"  alone  {statistics.median(alone):.3f} s (median; {', '.join(f'{x:.2f}' for x in alone)})")
            print(f"  beside a free request {statistics.median(beside_free):.3f} s "
                  f"(median; {', '.join(f'{x:.2f}' for x in beside_free)})")
            print(f"  beside the heavy one  {statistics.median(beside):.3f} s (median; {', '.join(f'{x:.2f}' for x in beside)})")
            print(f"  slowdown {ratio:.2f}x against alone, {own:.2f}x against beside a free request (goal <= 1.25x)")
            print(f"  heavy outputs: {[outcome(h, valid) for h in heavy_done]}")
    finally:
        server.terminate(); server.wait(timeout=30)

if __name__ == "__main__":
    sys.exit(main())
