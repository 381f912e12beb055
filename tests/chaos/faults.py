"""The chaos harness's faults. Each one does its harm, undoes it, and returns what it
saw; the harness then waits for recovery and for resources to settle.

  kill      kill -9 of a node, restarted at its address 1-3 s later
  stop      SIGSTOP of a node for 3-6 s, then SIGCONT
  linkdown  a node's veth on the bridge down for 3-6 s
  stall     the relay to node B stops forwarding for 4-8 s (connections stay open)
  burst     2,000 idle connections to the head's HTTP port, held 5 s, then closed
  crafted   the 64-byte BASP frame (two headers announcing 4 GB) to every guard
  flood     1,000 half-open connections to a node's guard for 6 s, while a process with
            the secret (`troupe plugins --node`, from the head's namespace) connects
"""
import errno
import os
import select
import signal
import socket
import subprocess
import time

from cluster import RELAY_PORT, STATS_PORT


def basp_header(op, payload_len, dest=0):
    h = bytearray(32)
    h[0] = op
    h[4:8] = payload_len.to_bytes(4, "big")
    h[24:32] = dest.to_bytes(8, "big")
    return bytes(h)


CRAFTED = basp_header(1, 0xFFFFFF00) + basp_header(2, 0xFFFFFF00, 1)  # 64 bytes


def open_many(host, port, count, timeout=10.0):
    """`count` connections (non-blocking connects, then waited for); the connected sockets."""
    pending, done = [], []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((host, port))
        if err in (0, errno.EINPROGRESS):
            pending.append(s)
        else:
            s.close()
    end = time.monotonic() + timeout
    poller = select.poll()
    by_fd = {s.fileno(): s for s in pending}
    for fd in by_fd:
        poller.register(fd, select.POLLOUT)
    while by_fd and time.monotonic() < end:
        for fd, _ in poller.poll(200):
            s = by_fd.pop(fd)
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                done.append(s)
            else:
                s.close()
    for s in by_fd.values():
        s.close()
    return done


def closed_within(sock, seconds):
    sock.setblocking(False)
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if poller.poll(100):
            try:
                if not sock.recv(4096):
                    return True
            except OSError:
                return True
    return False


class Faults:
    def __init__(self, cluster, judge, rng):
        self.c, self.judge, self.rng = cluster, judge, rng

    def kill(self, node):
        p = self.c.nodes[node]
        p.kill()
        time.sleep(self.rng.uniform(1, 3))
        p.start()
        return {}

    def stop(self, node):
        p = self.c.nodes[node]
        held = self.rng.uniform(3, 6)
        p.signal(signal.SIGSTOP)
        time.sleep(held)
        p.signal(signal.SIGCONT)
        return {"held_s": round(held, 1)}

    def linkdown(self, node):
        held = self.rng.uniform(3, 6)
        host = self.c.node_host[node]
        self.c.ns.link(host, False)
        time.sleep(held)
        self.c.ns.link(host, True)
        return {"held_s": round(held, 1)}

    def stall(self, _node=None):
        held = self.rng.uniform(4, 8)
        self.c.relay.signal(signal.SIGUSR1)
        time.sleep(held)
        self.c.relay.signal(signal.SIGUSR2)
        return {"held_s": round(held, 1)}

    def burst(self, _node=None):
        host, port = self.c.head_url()
        socks = open_many(host, port, 2000)
        time.sleep(5)
        # Past --max-connections the head answers 503 and closes: count those.
        refused = 0
        for s in socks:
            try:
                s.setblocking(False)
                if s.recv(64).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except OSError:
                pass
            s.close()
        return {"opened": len(socks), "answered_503": refused}

    def crafted(self, _node=None):
        targets = [self.c.guard(n) for n in ("A", "B", "C")]
        targets += [(self.c.ns.addr(3), RELAY_PORT), (self.c.ns.addr(0), STATS_PORT)]
        kept = []
        for host, port in targets:
            try:
                s = socket.create_connection((host, port), timeout=5)
            except OSError:
                continue  # a node being restarted
            s.sendall(CRAFTED)
            # 64 bytes are less than the handshake's answer: the guard closes at its handshake
            # deadline (10 s), the relay to B when B's guard does.
            if not closed_within(s, 15):
                kept.append(f"{host}:{port}")
            s.close()
        for k in kept:
            self.judge.violate("crafted frame", f"{k} kept a connection that sent a crafted BASP frame")
        return {"targets": len(targets), "kept": len(kept)}

    def flood(self, node):
        host, port = self.c.guard(node)
        socks = open_many(host, port, 1000)
        time.sleep(1)
        t0 = time.monotonic()
        c = self.c
        r = subprocess.run(["ip", "netns", "exec", c.ns.hosts[0], c.troupe, "plugins", "--node", f"{host}:{port}",
                            "--secret-file", c.secret], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60, env=c.env)
        took = time.monotonic() - t0
        if r.returncode != 0:
            self.judge.violate("flood", f"a peer with the secret was refused by node {node} under a flood: "
                                        f"{r.stdout.strip()[-300:]}")
        time.sleep(max(0.0, 6 - took))
        for s in socks:
            s.close()
        return {"opened": len(socks), "secret_peer_s": round(took, 2), "secret_peer_ok": r.returncode == 0}

    KINDS = {
        "kill": ["A", "B", "C"],
        "stop": ["A", "B", "C"],
        "linkdown": ["A", "B", "C"],
        "stall": [None],
        "burst": [None],
        "crafted": [None],
        "flood": ["A", "B", "C"],
    }

    def plan(self):
        """Every kind once, in a random order, each on a random target."""
        kinds = list(self.KINDS)
        self.rng.shuffle(kinds)
        return [(k, self.rng.choice(self.KINDS[k])) for k in kinds]

    def run(self, kind, target):
        return getattr(self, kind)(target)


def raise_descriptor_limit():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return os.sysconf("SC_OPEN_MAX")
