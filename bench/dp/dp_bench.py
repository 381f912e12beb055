#!/usr/bin/env python3
"""Routing policies for data parallel replicas on a shared-prefix workload.

Starts `troupe serve MODEL --data-parallel-size N --routing-policy P` once per policy
(and once as a single replica with N times the KV cache, holding every request: the hit
ratio the routed replicas are measured against), drives each with the same workload and
prints one table:

  * the workload: `--prefixes` system prompts of about `--prefix-tokens` tokens; each
    request continues a conversation of one prefix (its prompt is the prefix and every
    user turn so far, up to `--turns`), the prefix drawn with one hot prefix taking
    `--hot-share` of the requests and the rest uniform; `--requests` requests arriving as a
    Poisson process of `--rate` per second; each streams `--max-tokens` tokens;
  * per policy: prefix-cache hit ratio (vllm:prefix_cache_hits / queries over all
    replicas), TTFT p50 and p99 (client side), output tokens per second (all output over
    the run's wall time), and the load spread: every replica's mean of
    vllm:num_requests_running (sampled every 0.25 s while requests run), max over mean.

Each replica's KV cache is `--blocks-per-replica` blocks (--num-gpu-blocks-override), so
that one replica holds about a quarter of the prefixes: affinity keeps each prefix where
it is cached, round robin makes every replica hold every prefix.

Usage: bench/dp/dp_bench.py MODEL.gguf [--troupe build/bin/troupe] [options]; run it
quiet (/work/quiet.sh on the shared machines). Speed figures are ratios within one run.
"""
import argparse
import http.client
import json
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

WORDS = ("time river garden number story market winter engine silver forest language pattern "
         "science history window morning planet kitchen theory letter mountain question village "
         "machine ocean answer memory bridge castle doctor animal signal picture minute harbor").split()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def request(port, method, path, body=None, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def sum_metric(text, name):
    return sum(float(m.group(1)) for m in re.finditer(r"^%s\{[^}]*\} (\S+)$" % re.escape(name), text, re.M))


def per_engine(text, name):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r'^%s\{engine="(\d+)"[^}]*\} (\S+)$' % re.escape(name), text, re.M)}


class Server:
    def __init__(self, args, replicas, policy, blocks):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="dp_bench_", suffix=".log", delete=False)
        cmd = [args.troupe, "serve", args.model, "--host", "127.0.0.1", "--port", str(self.port),
               "--num-gpu-blocks-override", str(blocks), "--disable-log-stats", "--max-model-len",
               str(args.max_model_len)]
        if replicas > 1:
            cmd += ["--data-parallel-size", str(replicas), "--routing-policy", policy]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit("troupe serve exited:\n" + open(self.log.name).read()[-3000:])
            try:
                if request(self.port, "GET", "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        sys.exit("troupe serve did not become healthy")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def make_workload(args, port):
    """The prompts of every request, in arrival order, and the arrival times."""
    rng = random.Random(args.seed)
    prefixes = []
    for p in range(args.prefixes):
        words = [rng.choice(WORDS) for _ in range(args.prefix_tokens)]
        text = f"System prompt {p}: you answer questions about " + " ".join(words)
        status, body = request(port, "POST", "/tokenize", {"prompt": text})
        n = json.loads(body)["count"] if status == 200 else len(words)
        keep = max(1, int(len(words) * args.prefix_tokens / max(1, n)))  # trim to about prefix_tokens
        prefixes.append(f"System prompt {p}: you answer questions about " + " ".join(words[:keep]))
    conversations = {}  # prefix -> list of the user turns of its open conversation
    prompts, arrivals, t = [], [], 0.0
    for _ in range(args.requests):
        p = 0 if rng.random() < args.hot_share else rng.randrange(1, args.prefixes)
        turns = conversations.setdefault(p, [])
        if len(turns) >= args.turns:
            turns.clear()
        turns.append("User: " + " ".join(rng.choice(WORDS) for _ in range(args.turn_words)) + "?")
        prompts.append(prefixes[p] + "\n" + "\nAssistant: ...\n".join(turns) + "\nAssistant:")
        t += rng.expovariate(args.rate)
        arrivals.append(t)
    return prompts, arrivals


def one_request(port, prompt, max_tokens):
    """(ttft seconds, output tokens) of a streamed completion."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, tokens = None, 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if "error" in event:
            raise RuntimeError(event["error"])
        if ttft is None and event.get("choices") and event["choices"][0].get("text"):
            ttft = time.perf_counter() - start
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
    c.close()
    return ttft if ttft is not None else time.perf_counter() - start, tokens


def run(args, replicas, policy, blocks, workload):
    server = Server(args, replicas, policy, blocks)
    try:
        prompts, arrivals = workload or make_workload(args, server.port)
        before = request(server.port, "GET", "/metrics")[1]
        samples, done = [], threading.Event()

        def sample():
            while not done.is_set():
                samples.append(per_engine(request(server.port, "GET", "/metrics")[1], "vllm:num_requests_running"))
                time.sleep(0.25)

        sampler = threading.Thread(target=sample)
        start = time.perf_counter()
        sampler.start()
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            futures = []
            for prompt, at in zip(prompts, arrivals):
                delay = at - (time.perf_counter() - start)
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(one_request, server.port, prompt, args.max_tokens))
            results = [f.result() for f in futures]
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        after = request(server.port, "GET", "/metrics")[1]
    finally:
        server.stop()
    hits = sum_metric(after, "vllm:prefix_cache_hits_total") - sum_metric(before, "vllm:prefix_cache_hits_total")
    queries = sum_metric(after, "vllm:prefix_cache_queries_total") - sum_metric(before, "vllm:prefix_cache_queries_total")
    ttfts = sorted(r[0] for r in results)
    means = [statistics.mean(s.get(e, 0) for s in samples) for e in range(replicas)] if samples else [0]
    spread = max(means) / statistics.mean(means) if statistics.mean(means) > 0 else float("nan")
    return (prompts, arrivals), {
        "policy": policy if replicas > 1 else "one replica", "replicas": replicas, "blocks_per_replica": blocks,
        "hit_ratio": hits / queries if queries else 0.0, "ttft_p50_s": ttfts[len(ttfts) // 2],
        "ttft_p99_s": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))],
        "output_tok_s": sum(r[1] for r in results) / wall, "load_spread": spread, "wall_s": wall,
        "mean_running": means}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--troupe", default="build/bin/troupe")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--policies", default="round_robin,least_loaded,prefix_affinity")
    ap.add_argument("--prefixes", type=int, default=32)
    ap.add_argument("--prefix-tokens", type=int, default=2000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--turn-words", type=int, default=12)
    ap.add_argument("--requests", type=int, default=512)
    ap.add_argument("--rate", type=float, default=4.0, help="arrivals per second (Poisson)")
    ap.add_argument("--hot-share", type=float, default=0.3)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--blocks-per-replica", type=int, default=1200)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--no-single", action="store_true", help="skip the one-replica baseline")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rows, workload = [], None
    for policy in args.policies.split(","):
        workload, row = run(args, args.replicas, policy, args.blocks_per_replica, workload)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not args.no_single:
        _, row = run(args, 1, "-", args.blocks_per_replica * args.replicas, workload)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{args.requests} requests, {args.prefixes} prefixes of ~{args.prefix_tokens} tokens, hot share "
          f"{args.hot_share}, {args.rate}/s, {args.replicas} replicas x {args.blocks_per_replica} blocks\n")
    print("| policy | hit ratio | TTFT p50 (s) | TTFT p99 (s) | output tok/s | load spread |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['hit_ratio']:.3f} | {r['ttft_p50_s']:.2f} | {r['ttft_p99_s']:.2f} | "
              f"{r['output_tok_s']:.1f} | {r['load_spread']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
