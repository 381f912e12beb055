#!/usr/bin/env python3
"""The chaos harness (issue 48): a head with TP=2 over two `troupe node`s in network
namespaces plus a second node, streaming clients, and faults at random intervals,
with invariants checked all along and at the end:

  - every request completes with a correct finish reason and, greedy, the text of a
    quiet run, or fails with an error that names its cause; none hangs past its
    deadline, none is cut without a word (load.py);
  - /health answers within 2 s throughout;
  - after every fault the head serves again (a request gets the quiet run's text), and
    the RSS and descriptors of the head and the nodes return to their baseline;
  - no guard keeps a connection that sent a crafted frame; a peer with the secret
    passes a handshake flood.

  tests/chaos/chaos.py [--troupe build/bin/troupe] [--model tests/data/stories260K.gguf]
                       [--minutes 30] [--clients 24] [--seed N] [--json FILE]

Needs root and iproute2 (network namespaces); without them it exits 77 (ctest's skip)
saying why. Bounded in time: the minutes given, plus start-up and a final minute at most.
The topology and processes are in cluster.py, the load and watchers in load.py, the
faults in faults.py. Everything it makes is removed on exit.
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, Namespaces  # noqa: E402
from faults import Faults, raise_descriptor_limit  # noqa: E402
from load import Judge, Watchers, client_loop, health, quiet_outputs, stream_completion  # noqa: E402

SUBNET = "10.233.0"
MiB = 1 << 20


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


def log(judge, text):
    print(f"[{time.monotonic() - judge.t0:7.1f} s] {text}", flush=True)


def wait_healthy(host, port, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if health(host, port)[0] == 200:
            return True
        time.sleep(0.2)
    return False


def serves_again(host, port, expected, seconds):
    """A streamed greedy request gets the quiet run's text again (the server accepts again)."""
    end = time.monotonic() + seconds
    prompt = next(iter(expected))
    while time.monotonic() < end:
        status, text, finish, error, done, problem = stream_completion(host, port, prompt, 30)
        if status == 200 and done and not error and not problem and text == expected[prompt]:
            return True
        time.sleep(0.3)
    return False


def within(usage, baseline, slack_rss, slack_fds):
    """Names of the processes whose RSS or descriptors are above their baseline's slack."""
    over = []
    for name, (rss, fds) in usage.items():
        b_rss, b_fds = baseline[name]
        if rss == 0:
            continue  # being restarted
        if rss > max(b_rss + slack_rss, b_rss * 1.25) or fds > b_fds + slack_fds:
            over.append(f"{name}: RSS {rss / MiB:.0f} MiB (baseline {b_rss / MiB:.0f}), fds {fds} (baseline {b_fds})")
    return over


def settle(watchers, baseline, seconds):
    """Seconds until every process is back within its baseline's slack, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not within(watchers.usage(), baseline, 64 * MiB, 32):
            return round(time.monotonic() - t0, 1)
        time.sleep(1)
    return None


def baseline_of(watchers, since):
    """Per process: the largest RSS and descriptor count sampled since `since` (s)."""
    out = {}
    with watchers.lock:
        window = [u for t, u in watchers.samples if t >= since]
    for name in ("head", "A", "B", "C"):
        out[name] = (max(u[name][0] for u in window), max(u[name][1] for u in window))
    return out


def curve_summary(watchers):
    """Per process: RSS (MiB) and descriptors, min/median/max, and one point every 30 s."""
    with watchers.lock:
        samples = list(watchers.samples)
    out = {}
    for name in ("head", "A", "B", "C"):
        rss = [u[name][0] / MiB for _, u in samples if u[name][0]]
        fds = [u[name][1] for _, u in samples if u[name][0]]
        if not rss:
            continue
        out[name] = {"rss_mib": [round(min(rss)), round(statistics.median(rss)), round(max(rss))],
                     "fds": [min(fds), int(statistics.median(fds)), max(fds)],
                     "every_30s": [(t, round(u[name][0] / MiB), u[name][1]) for t, u in samples[::30]]}
    return out


def run_faults(args, cluster, judge, watchers, expected, baseline, rng):
    faults = Faults(cluster, judge, rng)
    host, port = cluster.head_url()
    records, plan = [], []
    end = judge.t0 + args.minutes * 60
    while time.monotonic() < end - 20:
        if not plan:
            plan = faults.plan()
        kind, target = plan.pop(0)
        t = round(time.monotonic() - judge.t0, 1)
        log(judge, f"fault: {kind} {target or ''}")
        info = faults.run(kind, target)
        took = round(time.monotonic() - judge.t0 - t, 1)
        recovered = wait_healthy(host, port, 120)
        rec = {"t": t, "kind": kind, "target": target, "took_s": took, **info,
               "recovery_s": round(time.monotonic() - judge.t0 - t - took, 1) if recovered else None}
        if not recovered:
            judge.violate("recovery", f"{kind} {target}: /health not 200 within 120 s")
        elif not serves_again(host, port, expected, 60):
            judge.violate("recovery", f"{kind} {target}: no request served within 60 s after it")
        rec["settle_s"] = settle(watchers, baseline, 60)
        if rec["settle_s"] is None:
            judge.violate("resources", f"{kind} {target}: " + "; ".join(within(watchers.usage(), baseline, 64 * MiB, 32)))
        if not cluster.head.alive():
            judge.violate("head", "the head exited")
            records.append(rec)
            break
        log(judge, f"  -> {rec}")
        records.append(rec)
        time.sleep(rng.uniform(5, 15))
    return records


def inside(args):
    """The run itself, from the harness's own namespace (h5)."""
    raise_descriptor_limit()
    ns = Namespaces(args.tag, SUBNET)
    work = args.work
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write(f"chaos-{os.getpid()}-{time.time_ns()}\n")
    os.chmod(secret, 0o600)
    rng = random.Random(args.seed)
    judge = Judge()
    log(judge, f"seed {args.seed} (replay: --seed {args.seed}), {args.minutes} min, {args.clients} clients")
    cluster = Cluster(ns, args.troupe, args.model, work, secret, args.max_connections)
    host, port = cluster.head_url()
    stop = threading.Event()
    watchers = Watchers(cluster, judge)
    records, clients, baseline = [], [], {}
    try:
        cluster.start()
        if not wait_healthy(host, port, 240):
            print("the head did not become healthy; its log:\n" + cluster.head.log()[-4000:])
            return 1
        log(judge, "cluster up; the quiet run")
        expected = quiet_outputs(host, port)
        watchers.start()
        clients = [threading.Thread(target=client_loop, args=(host, port, expected, judge, stop, args.deadline, i),
                                    daemon=True) for i in range(args.clients)]
        for t in clients:
            t.start()
        warm = min(30.0, args.minutes * 60 / 10)
        log(judge, f"{args.clients} clients streaming; baseline over {warm:.0f} s")
        t_warm = time.monotonic() - judge.t0
        time.sleep(warm)
        baseline = baseline_of(watchers, t_warm)
        log(judge, "baseline: " + ", ".join(f"{n} {r / MiB:.0f} MiB {f} fds" for n, (r, f) in baseline.items()))
        records = run_faults(args, cluster, judge, watchers, expected, baseline, rng)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=args.deadline + 10)
        watchers.join()
        final = watchers.usage() if watchers.samples else {}
        cluster.stop_all()
    report = {"minutes": args.minutes, "seed": args.seed, "clients": args.clients,
              "faults": records, "fault_counts": {},
              "requests": {"completed": judge.completed, "failed": judge.failed},
              "violations": judge.violations,
              "health": {"checks": watchers.health_checks, "worst_s": round(watchers.health_worst, 2),
                         "over_2s": watchers.health_slow},
              "baseline": {n: [round(r / MiB), f] for n, (r, f) in baseline.items()},
              "final": {n: [round(r / MiB), f] for n, (r, f) in final.items()},
              "curves": curve_summary(watchers)}
    for r in records:
        key = r["kind"] + (f" {r['target']}" if r["target"] else "")
        report["fault_counts"][key] = report["fault_counts"].get(key, 0) + 1
    text = json.dumps(report, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    print(text)
    ok = not judge.violations and records
    print("chaos: " + ("all invariants held" if ok else f"{len(judge.violations)} violation(s)"), flush=True)
    return 0 if ok else 1


def outside(args):
    """Makes the namespaces, runs the harness inside h5, and removes everything."""
    if os.geteuid() != 0:
        skip("network namespaces need root")
    if not shutil.which("ip"):
        skip("iproute2 (ip) is not installed")
    # A SIGTERM (ctest's timeout, a stopped run) goes the way of ^C, through the cleanup below.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tag = f"cz{os.getpid() % 100000}"
    ns = Namespaces(tag, SUBNET)
    work = tempfile.mkdtemp(prefix="troupe_chaos_")
    try:
        try:
            ns.create()
        except RuntimeError as e:
            skip(f"cannot create network namespaces: {e}")
        argv = [sys.executable, os.path.abspath(__file__), "--inside", "--tag", tag, "--work", work] + sys.argv[1:]
        child = subprocess.Popen(["ip", "netns", "exec", ns.hosts[5]] + argv)
        limit = args.minutes * 60 + 600
        try:
            return child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            print(f"chaos: the run passed its bound of {limit} s; stopped", flush=True)
            child.kill()
            return 1
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            child.wait(timeout=60)
            return 1
    finally:
        for f in os.listdir(work):
            if f.endswith(".pid"):
                try:
                    with open(os.path.join(work, f)) as p:
                        os.kill(int(p.read().strip()), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        ns.destroy()
        if args.keep:
            print(f"chaos: logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", default=os.path.join(root, "build/bin/troupe"))
    ap.add_argument("--model", default=os.path.join(root, "tests/data/stories260K.gguf"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=24)
    ap.add_argument("--deadline", type=float, default=60, help="seconds a request may take before it is a hang")
    ap.add_argument("--max-connections", type=int, default=1024, help="the head's cap (a burst of 2,000 passes it)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true", help="keep the logs")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not os.access(args.troupe, os.X_OK):
        print(f"chaos: {args.troupe} is not an executable (build first, or pass --troupe)")
        return 2
    return inside(args) if args.inside else outside(args)


if __name__ == "__main__":
    sys.exit(main())
