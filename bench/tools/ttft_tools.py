#!/usr/bin/env python3
"""Time to first token of a chat request with `tools` beside the same request
without them (issue 23: within 10%), on one `troupe serve` started here with
--enable-auto-tool-choice --tool-call-parser hermes, alternating, streamed.
Prints medians, the ratio, and both prompts' token counts: the model's template
renders the tool definitions into the prompt, so part of any difference is the
longer prefill, the rest is troupe's own work on tools.

  bench/tools/ttft_tools.py [--troupe build/bin/troupe] [--model GGUF] [--rounds 10]
"""
import argparse, json, os, socket, statistics, subprocess, sys, time, urllib.request


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}},
         {"type": "function", "function": {
             "name": "get_time", "description": "The local time in a time zone",
             "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}]


def ttft(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    first = None
    usage = None
    with urllib.request.urlopen(req, timeout=300) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if first is None and ev.get("choices") and ev["choices"][0].get("delta"):
                d = ev["choices"][0]["delta"]
                if d.get("content") or d.get("tool_calls") or d.get("reasoning_content"):
                    first = time.monotonic() - t0
            if ev.get("usage"):
                usage = ev["usage"]
    return first, usage["prompt_tokens"] if usage else -1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", default=os.path.join(root, "build/bin/troupe"))
    ap.add_argument("--model", default=os.environ.get("TROUPE_TEST_MODEL", ""))
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    if not a.model:
        a.model = subprocess.run([os.path.join(root, "scripts/fetch-model.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip()
    port = free_port()
    server = subprocess.Popen([a.troupe, "serve", a.model, "--port", str(port), "--enable-auto-tool-choice",
                               "--tool-call-parser", "hermes", "--no-enable-prefix-caching"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1); break
            except Exception:
                time.sleep(0.2)
        base = {"messages": [{"role": "user", "content": "What is the weather like in Paris today?"}],
                "max_tokens": 8, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
        with_tools = dict(base, tools=TOOLS, tool_choice="auto")
        ttft(port, base); ttft(port, with_tools)  # warm-up
        plain, tools = [], []
        for _ in range(a.rounds):
            t, n_plain = ttft(port, base); plain.append(t)
            t, n_tools = ttft(port, with_tools); tools.append(t)
        mp, mt = statistics.median(plain), statistics.median(tools)
        print(f"model {os.path.basename(a.model)}, {a.rounds} rounds alternated, prefix caching off")
        print(f"  without tools: TTFT {mp * 1000:.1f} ms (median), prompt {n_plain} tokens")
        print(f"  with 2 tools:  TTFT {mt * 1000:.1f} ms (median), prompt {n_tools} tokens")
        print(f"  ratio {mt / mp:.2f}x (goal <= 1.10x)")
    finally:
        server.terminate(); server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
