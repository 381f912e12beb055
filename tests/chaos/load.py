"""The chaos harness's load and watchers: streaming clients whose every request is
judged, a /health prober, and a sampler of RSS and descriptors.

A request is judged when it ends:
  completed  200, [DONE], a finish_reason of "length" or "stop" and, greedy, the text
             the quiet run gave for its prompt (else: a violation, "output differs");
  failed     an HTTP error or an SSE error event with a message: the cause, counted;
  violation  no answer by its deadline ("hang"), a stream that ended without [DONE]
             and without an error ("truncated"), an error without a message, a
             connection that broke without a word ("no cause").
"""
import http.client
import json
import random
import re
import socket
import threading
import time

from cluster import rss_and_fds

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to", "One day a bird",
           "The sun was hot and", "Tim had a red ball", "There was a big tree", "Mom said to Sue"]
MAX_TOKENS = 32


def cause_of(message):
    """A short class of an error message, for counting."""
    m = message.lower()
    for key, name in [("too many connections", "max_connections"), ("out of file descriptors", "out_of_fds"),
                      ("shutting down", "shutting_down"), ("lost", "node_lost"), ("unhealthy", "unhealthy"),
                      ("rebuild", "rebuilding"), ("timed out", "timeout"), ("unavailable", "unavailable"),
                      ("queue", "queue_full")]:
        if key in m:
            return name
    return re.sub(r"[0-9.:]+", "#", message)[:60]


class Judge:
    """What every request came to, thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.completed = 0
        self.failed = {}        # cause -> count
        self.violations = []    # (t, kind, detail)
        self.t0 = time.monotonic()

    def ok(self):
        with self.lock:
            self.completed += 1

    def fail(self, message):
        with self.lock:
            c = cause_of(message)
            self.failed[c] = self.failed.get(c, 0) + 1

    def violate(self, kind, detail):
        with self.lock:
            self.violations.append((round(time.monotonic() - self.t0, 1), kind, detail[:300]))


def stream_completion(host, port, prompt, deadline_s):
    """One streamed greedy completion: (status, text, finish_reason, error, done, problem)."""
    body = json.dumps({"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True})
    end = time.monotonic() + deadline_s
    conn = http.client.HTTPConnection(host, port, timeout=deadline_s)
    text, finish, error, done = "", None, None, False
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raw = resp.read().decode(errors="replace")
            try:
                error = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                error = None
            return resp.status, "", None, error, False, None if error else f"HTTP {resp.status} without a message"
        buf = b""
        while time.monotonic() < end:
            conn.sock.settimeout(max(0.1, end - time.monotonic()))
            chunk = resp.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    data = line[6:]
                    if data == b"[DONE]":
                        done = True
                        continue
                    j = json.loads(data)
                    if "error" in j:
                        error = j["error"].get("message") or ""
                        continue
                    for c in j.get("choices", []):
                        text += c.get("text", "")
                        if c.get("finish_reason"):
                            finish = c["finish_reason"]
        else:
            return 200, text, finish, error, done, "hang"
        return 200, text, finish, error, done, None
    except socket.timeout:
        return 0, text, finish, error, done, "hang"
    except (OSError, http.client.HTTPException) as e:
        return 0, text, finish, error, done, f"connection: {e!r}"
    finally:
        conn.close()


def client_loop(host, port, expected, judge, stop, deadline_s, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        prompt = rng.choice(PROMPTS)
        t0 = time.monotonic()
        status, text, finish, error, done, problem = stream_completion(host, port, prompt, deadline_s)
        took = time.monotonic() - t0
        if problem == "hang":
            judge.violate("hang", f"{prompt!r}: no end within {deadline_s} s")
        elif error is not None:
            if error:
                judge.fail(error)
            else:
                judge.violate("no cause", f"{prompt!r}: an error without a message (HTTP {status})")
        elif problem:
            judge.violate("no cause", f"{prompt!r}: {problem}")
        elif not done or finish not in ("length", "stop"):
            judge.violate("truncated", f"{prompt!r}: done={done} finish_reason={finish} after {took:.1f} s")
        elif text != expected[prompt]:
            judge.violate("output differs", f"{prompt!r}: {text!r} != {expected[prompt]!r}")
        else:
            judge.ok()
        if status != 200 or error is not None:
            time.sleep(0.2)


def quiet_outputs(host, port):
    """The greedy text of every prompt, one request at a time."""
    out = {}
    for p in PROMPTS:
        status, text, finish, error, done, problem = stream_completion(host, port, p, 60)
        if status != 200 or error or problem or not done:
            raise RuntimeError(f"the quiet run failed for {p!r}: {status} {error} {problem}")
        out[p] = text
    return out


def health(host, port, timeout=2.0):
    """(status, seconds) of one GET /health; status 0 when it did not answer in time."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        r = conn.getresponse()
        r.read()
        return r.status, time.monotonic() - t0
    except (OSError, http.client.HTTPException):
        return 0, time.monotonic() - t0
    finally:
        conn.close()


class Watchers:
    """The /health prober (every 0.5 s) and the sampler (every second), in threads."""

    def __init__(self, cluster, judge):
        self.cluster, self.judge = cluster, judge
        self.stop = threading.Event()
        self.samples = []       # (t, {name: (rss, fds)})
        self.health_slow = 0
        self.health_checks = 0
        self.health_worst = 0.0
        self.lock = threading.Lock()

    def start(self):
        self.threads = [threading.Thread(target=self.probe, daemon=True),
                        threading.Thread(target=self.sample, daemon=True)]
        for t in self.threads:
            t.start()

    def probe(self):
        host, port = self.cluster.head_url()
        while not self.stop.is_set():
            status, took = health(host, port)
            with self.lock:
                self.health_checks += 1
                self.health_worst = max(self.health_worst, took)
            if status == 0:
                self.health_slow += 1
                self.judge.violate("health", f"/health did not answer within 2 s ({took:.2f} s)")
            self.stop.wait(0.5)

    def procs(self):
        c = self.cluster
        return {"head": c.head, "A": c.nodes["A"], "B": c.nodes["B"], "C": c.nodes["C"]}

    def usage(self):
        return {name: p.usage() for name, p in self.procs().items()}

    def sample(self):
        while not self.stop.is_set():
            u = self.usage()
            with self.lock:
                self.samples.append((round(time.monotonic() - self.judge.t0, 1), u))
            self.stop.wait(1.0)

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
