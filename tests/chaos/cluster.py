"""The chaos harness's cluster: network namespaces joined by veth pairs through a
bridge in a namespace of its own (as tests/apps/netns/netns_lib.sh makes them, so
no traffic touches the machine's own stack), and the real processes in them:

    h0  the head: `troupe serve` with TP=2 over node A and node B
    h1  node A (rank 0)
    h2  node B (rank 1), which the head reaches through the relay in h3
    h3  tests/apps/netns/delay_relay.py (SIGUSR1 stalls the link, SIGUSR2 resumes)
    h4  node C, a second node the head does not use (no replicas yet)
    h5  the harness itself: clients, probes and attackers

Every process is started through `ip netns exec` and writes its own pid first, so it
can be signalled and measured (/proc) from any namespace. Everything is removed on
teardown, whatever happened.
"""
import os
import signal
import subprocess
import time

NODE_PORT = 7100
RELAY_PORT = 7300
HTTP_PORT = 8000
STATS_PORT = 7200


def run(*cmd, check=True):
    r = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout.strip()}")
    return r


class Namespaces:
    """TAGsw (the bridge) and TAGh0..h5 at SUBNET.1..6."""

    def __init__(self, tag, subnet, count=6):
        self.tag = tag
        self.subnet = subnet
        self.sw = self.tag + "sw"
        self.hosts = [f"{self.tag}h{n}" for n in range(count)]

    def addr(self, n):
        return f"{self.subnet}.{n + 1}"

    def create(self):
        run("ip", "netns", "add", self.sw)
        run("ip", "-n", self.sw, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.sw, "link", "set", "br0", "up")
        for n, h in enumerate(self.hosts):
            run("ip", "netns", "add", h)
            run("ip", "link", "add", f"v{n}", "netns", self.sw, "type", "veth", "peer", "name", "eth0", "netns", h)
            run("ip", "-n", self.sw, "link", "set", f"v{n}", "master", "br0")
            run("ip", "-n", self.sw, "link", "set", f"v{n}", "up")
            run("ip", "-n", h, "addr", "add", f"{self.addr(n)}/24", "dev", "eth0")
            run("ip", "-n", h, "link", "set", "eth0", "up")
            run("ip", "-n", h, "link", "set", "lo", "up")

    def link(self, n, up):
        run("ip", "-n", self.sw, "link", "set", f"v{n}", "up" if up else "down")

    def destroy(self):
        for h in self.hosts + [self.sw]:
            run("ip", "netns", "del", h, check=False)


def rss_and_fds(pid):
    """(RSS bytes, open descriptors) of a live process; (0, 0) when it is gone."""
    try:
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0, 0


class Proc:
    """A process in a namespace, started with its log in the work folder."""

    def __init__(self, ns, host, name, argv, work, ready=None, env=None):
        self.ns, self.host, self.name, self.argv, self.work, self.ready = ns, host, name, argv, work, ready
        self.env = env
        self.starts = 0
        self.pid = None
        self.log_path = None

    def start(self, timeout=120):
        self.starts += 1
        self.pid = None
        self.log_path = os.path.join(self.work, f"{self.name}.{self.starts}.log")
        pidfile = os.path.join(self.work, f"{self.name}.{self.starts}.pid")
        log = open(self.log_path, "w")
        cmd = ["ip", "netns", "exec", self.ns.hosts[self.host], "sh", "-c", 'echo $$ >"$0"; exec "$@"', pidfile]
        subprocess.Popen(cmd + self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid is None:
                try:
                    with open(pidfile) as f:
                        text = f.read().strip()
                    if text:
                        self.pid = int(text)
                except OSError:
                    pass
            if self.pid and self.alive() and (self.ready is None or self.ready(self)):
                return
            if self.pid and not self.alive():
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start; its log:\n{self.log()[-3000:]}")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        if not self.pid:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().split(") ")[1][0] not in "ZX"
        except (OSError, IndexError):
            return False

    def signal(self, sig):
        if self.pid:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.signal(signal.SIGKILL)
        for _ in range(200):
            if not self.alive():
                break
            time.sleep(0.02)

    def usage(self):
        return rss_and_fds(self.pid) if self.pid else (0, 0)


def in_log(text):
    return lambda p: text in p.log()


class Cluster:
    """The head, three nodes and the relay, in their namespaces."""

    def __init__(self, ns, troupe, model, work, secret, max_connections):
        self.ns, self.troupe, self.model, self.work, self.secret = ns, troupe, model, work, secret
        env = dict(os.environ)
        env.pop("TROUPE_CPU_COMM", None)
        self.env = env

        def node(host, name):
            argv = [troupe, "node", "--host", ns.addr(host), "--port", str(NODE_PORT), "--secret-file", secret]
            return Proc(ns, host, name, argv, work, in_log("listening"), env)

        self.nodes = {"A": node(1, "nodeA"), "B": node(2, "nodeB"), "C": node(4, "nodeC")}
        self.node_host = {"A": 1, "B": 2, "C": 4}
        relay_py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "apps", "netns",
                                "delay_relay.py")
        self.relay = Proc(ns, 3, "relay", ["python3", relay_py, ns.addr(3), str(RELAY_PORT), ns.addr(2),
                                           str(NODE_PORT), "--delay-ms", "0"], work, in_log("relay listening"), env)
        head_argv = [troupe, "serve", model, "--host", ns.addr(0), "--port", str(HTTP_PORT), "--threads", "1",
                     "--tensor-parallel-size", "2", "--nodes",
                     f"{ns.addr(1)}:{NODE_PORT},{ns.addr(3)}:{RELAY_PORT}", "--secret-file", secret,
                     "--disable-log-stats", "--max-num-seqs", "32", "--max-connections", str(max_connections),
                     # A small KV cache, touched whole within the warm-up: with the default (1 GiB on
                     # each node, its pages touched block by block as the free list cycles) the
                     # nodes' RSS rose ~40 MiB every 30 s for minutes, which no baseline can tell
                     # from a leak.
                     "--num-gpu-blocks-override", "4096",
                     "--stats-port", str(STATS_PORT), "--stats-host", ns.addr(0)]
        self.head = Proc(ns, 0, "head", head_argv, work, None, env)

    def start(self):
        for n in self.nodes.values():
            n.start()
        self.relay.start()
        self.head.start()

    def head_url(self):
        return self.ns.addr(0), HTTP_PORT

    def guard(self, node):
        return self.ns.addr(self.node_host[node]), NODE_PORT

    def stop_all(self):
        for p in [self.head, self.relay] + list(self.nodes.values()):
            if p.pid:
                p.kill()
