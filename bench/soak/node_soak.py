#!/usr/bin/env python3
"""A soak across nodes (issue 26): steady load at concurrency 16 against a
TP=2 `troupe serve` over two `troupe node` processes on loopback, with one
node killed (-9) and restarted at its address every few minutes. Reports
requests completed and failed (split into: in flight when a node died, refused
while the engine recovered, and any other), the head's RSS and open file
descriptors over time, and each kill's recovery time (kill to /health 200).

  bench/soak/node_soak.py [--troupe build/bin/troupe] [--model tests/data/stories260K.gguf]
                          [--minutes 30] [--kill-every 300] [--concurrency 16] [--json FILE]
"""
import argparse, json, os, signal, socket, subprocess, sys, tempfile, threading, time, urllib.error, urllib.request


def free_port(host="127.0.0.1"):
    s = socket.socket()
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Node:
    def __init__(self, troupe, host, port, secret, logdir, idx):
        self.args = [troupe, "node", "--host", host, "--port", str(port), "--secret-file", secret]
        self.address = f"{host}:{port}"
        self.logdir, self.idx, self.starts, self.proc = logdir, idx, 0, None
        self.start()

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.logdir, f"node{self.idx}.{self.starts}.log"), "w")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with open(log.name) as f:
                    if "listening" in f.read():
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                time.sleep(0.5)  # the address may still be held: try again
                self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(0.05)
        raise RuntimeError(f"node {self.address} did not start")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def rss_and_fds(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", default=os.path.join(root, "build/bin/troupe"))
    ap.add_argument("--model", default=os.path.join(root, "tests/data/stories260K.gguf"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--kill-every", type=float, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="troupe_soak_")
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write(f"soak-{os.getpid()}-{time.time_ns()}\n")
    os.chmod(secret, 0o600)
    nodes = [Node(a.troupe, "127.0.0.1", free_port(), secret, work, 0),
             Node(a.troupe, "127.0.0.2", free_port("127.0.0.2"), secret, work, 1)]
    port = free_port()
    serve_log = open(os.path.join(work, "serve.log"), "w")
    serve = subprocess.Popen([a.troupe, "serve", a.model, "--port", str(port), "--tensor-parallel-size", "2",
                              "--nodes", ",".join(n.address for n in nodes), "--secret-file", secret,
                              "--max-num-seqs", str(a.concurrency), "--disable-log-stats"],
                             stdout=serve_log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                return r.status == 200
        except Exception:
            return False

    deadline = time.monotonic() + 120
    while not healthy():
        if time.monotonic() > deadline or serve.poll() is not None:
            print("serve did not become healthy; log:", open(serve_log.name).read()[-3000:])
            return 1
        time.sleep(0.2)

    lock = threading.Lock()
    done = {"ok": 0, "in_flight_at_kill": 0, "refused_recovering": 0, "other": 0}
    other_errors = []
    kills = []  # (killed_at, recovered_at)
    stop = threading.Event()

    def recovering(t0, t1):
        # A request overlapping [kill, recovery + 2 s] of some kill.
        for k, r in kills:
            end = (r if r is not None else float("inf")) + 2.0
            if t0 <= end and t1 >= k:
                return True
        return False

    def client(i):
        body = json.dumps({"prompt": f"Once upon a time {i}", "max_tokens": a.max_tokens, "temperature": 0.8,
                           "seed": i}).encode()
        while not stop.is_set():
            t0 = time.monotonic()
            status, text = 0, ""
            try:
                req = urllib.request.Request(base + "/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=120) as r:
                    status = r.status
                    text = r.read().decode()
            except urllib.error.HTTPError as e:
                status, text = e.code, e.read().decode(errors="replace")
            except Exception as e:  # connection errors: the head itself went away
                status, text = -1, repr(e)
            t1 = time.monotonic()
            with lock:
                if status == 200:
                    done["ok"] += 1
                elif status == 503 and recovering(t0, t1):
                    started_before_kill = any(t0 < k for k, _ in kills if k <= t1)
                    done["in_flight_at_kill" if started_before_kill else "refused_recovering"] += 1
                else:
                    done["other"] += 1
                    if len(other_errors) < 20:
                        other_errors.append((round(t1 - start, 1), status, text[:300]))
            if status != 200:
                time.sleep(0.1)

    samples = []
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.concurrency)]
    for t in threads:
        t.start()
    next_kill = start + a.kill_every
    next_sample = start
    victim = 1
    try:
        while time.monotonic() - start < a.minutes * 60:
            now = time.monotonic()
            if now >= next_sample:
                rss, fds = rss_and_fds(serve.pid)
                with lock:
                    samples.append({"t_s": round(now - start), "rss_mib": round(rss / 2**20, 1), "fds": fds,
                                    "completed": done["ok"]})
                next_sample += 30
            if now >= next_kill:
                node = nodes[victim]
                killed = time.monotonic()
                with lock:
                    kills.append((killed, None))
                node.kill()
                node.start()  # at its address again
                while not healthy() and time.monotonic() - killed < 120:
                    time.sleep(0.1)
                with lock:
                    kills[-1] = (killed, time.monotonic())
                print(f"[{killed - start:7.1f} s] killed node {node.address}; serving again after "
                      f"{kills[-1][1] - killed:.1f} s", flush=True)
                victim = 1 - victim
                next_kill += a.kill_every
            if serve.poll() is not None:
                print("the head exited!")
                break
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=130)
        rss, fds = rss_and_fds(serve.pid) if serve.poll() is None else (0, 0)
        samples.append({"t_s": round(time.monotonic() - start), "rss_mib": round(rss / 2**20, 1), "fds": fds,
                        "completed": done["ok"]})
        serve.terminate()
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
        for n in nodes:
            n.kill()

    report = {"minutes": a.minutes, "concurrency": a.concurrency, "kill_every_s": a.kill_every,
              "requests": done, "recovery_s": [round(r - k, 2) for k, r in kills if r is not None],
              "head_samples": samples, "other_errors": other_errors, "logs": work}
    print(json.dumps({k: v for k, v in report.items() if k != "head_samples"}, indent=1))
    print(f"{'t (s)':>7} {'RSS MiB':>8} {'fds':>5} {'completed':>10}")
    for s in samples:
        print(f"{s['t_s']:>7} {s['rss_mib']:>8} {s['fds']:>5} {s['completed']:>10}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if done["other"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
