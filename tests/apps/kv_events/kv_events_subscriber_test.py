#!/usr/bin/env python3
"""vLLM's KV cache events from a real `troupe serve --data-parallel-size 2`, read as an
external router reads vLLM's: a ZMQ SUB socket per replica (the endpoint's port + the
replica), three frames per batch (topic, 8-byte big-endian sequence, msgpack EventBatch),
and the replay socket for what was missed.

Checks:
  * the wire format is vLLM's byte for byte: every payload decodes with vLLM's msgspec
    types (EventBatch array_like; events tagged, array_like, omit_defaults; the classes
    are declared below from vLLM's field names) and encodes back to the same bytes;
  * the fields are vLLM's: data_parallel_rank is the replica, medium "GPU", block_size 16,
    token_ids block_size per hash, lora_id/lora_name None;
  * the hashes are troupe's chained block hashes (runtime/core/sched/block_hash,
    recomputed here with hashlib from each event's parent and tokens), in vLLM's integer
    form (the digest's last 8 bytes, big-endian);
  * they follow the prefix cache exactly: in a cache of 24 blocks per replica, with
    evictions, before each probe the blocks of its prompt that the subscriber holds for the
    replica predict the prefix-cache hit the server then reports for it in /metrics
    (vllm:prefix_cache_hits_total{engine=R}), token for token;
  * the replay socket returns every batch again, byte for byte, then vLLM's end marker (-1).

Usage: kv_events_subscriber_test.py TROUPE_BIN MODEL.gguf
"""
import hashlib
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import msgpack
import msgspec
import zmq

BLOCK = 16
REPLICAS = 2
TOPIC = "kv-test"


# vLLM's event types (vllm/distributed/kv_events.py, the last release that encoded events as
# arrays), declared from its field names and struct options so that msgspec decodes and
# re-encodes exactly as vLLM's own code does.
class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[Any] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: str | None
    group_idx: int | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


DECODER = msgspec.msgpack.Decoder(KVEventBatch)
ENCODER = msgspec.msgpack.Encoder()


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def check(cond, message):
    if not cond:
        fail(message)


def block_hash(parent: bytes | None, tokens: list[int]) -> bytes:
    """troupe's chained block hash (runtime/core/sched/block_hash.cpp), no salt, base model."""
    h = hashlib.sha256()
    h.update(b"\x01" + parent if parent is not None else b"\x00")
    h.update(struct.pack("<Q", len(tokens)))
    for t in tokens:
        h.update(struct.pack("<I", t & 0xFFFFFFFF))
    h.update(b"\x00")  # no cache salt
    return h.digest()


def external(digest: bytes) -> int:
    return int.from_bytes(digest[-8:], "big")


def prompt_hashes(tokens: list[int]) -> list[int]:
    out, parent = [], None
    for i in range(len(tokens) // BLOCK):
        parent = block_hash(parent, tokens[i * BLOCK:(i + 1) * BLOCK])
        out.append(external(parent))
    return out


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_port_pair() -> int:
    """A port p with p and p + 1 free (replica r publishes on p + r)."""
    for _ in range(100):
        p = free_port()
        try:
            s = socket.socket()
            s.bind(("127.0.0.1", p + 1))
            s.close()
            return p
        except OSError:
            continue
    fail("no two consecutive free ports")


def http(base, path, body=None, headers=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def hits(base, replica) -> float:
    _, text = http(base, "/metrics")
    m = re.search(r'^vllm:prefix_cache_hits_total\{engine="%d",model_name="[^"]*"\} (\S+)$' % replica, text, re.M)
    check(m, f"no vllm:prefix_cache_hits_total for engine {replica} in /metrics")
    return float(m.group(1))


class Subscriber:
    """One replica's SUB socket: every batch by sequence number, decoded and checked."""

    def __init__(self, ctx, replica, pub_port, replay_port):
        self.replica = replica
        self.sub = ctx.socket(zmq.SUB)
        self.sub.connect(f"tcp://127.0.0.1:{pub_port + replica}")
        self.sub.setsockopt_string(zmq.SUBSCRIBE, TOPIC)
        self.replay_port = replay_port + replica
        self.ctx = ctx
        self.payloads = {}        # seq -> bytes
        self.cached = set()       # the replica's prefix cache as the events say
        self.digests = {}         # external hash -> full digest (to chain the next block)
        self.stored = self.removed = self.cleared = 0

    def drain(self, quiet_ms=300):
        while self.sub.poll(quiet_ms):
            topic, seq, payload = self.sub.recv_multipart()
            check(topic == TOPIC.encode(), f"topic {topic!r}")
            check(len(seq) == 8, f"a sequence frame of {len(seq)} bytes")
            self.take(int.from_bytes(seq, "big"), payload)

    def replay(self, start):
        """Every buffered batch from `start` on, through vLLM's replay protocol. A DEALER
        socket: the ROUTER answers one request with many messages (a REQ takes only one)."""
        req = self.ctx.socket(zmq.DEALER)
        req.connect(f"tcp://127.0.0.1:{self.replay_port}")
        req.send_multipart([b"", start.to_bytes(8, "big")])
        out = []
        while True:
            check(req.poll(5000), f"replica {self.replica}: the replay did not answer")
            frames = req.recv_multipart()
            check(len(frames) == 3 and frames[0] == b"", f"a replay answer of {len(frames)} frame(s)")
            _, seq, payload = frames
            if seq == (-1).to_bytes(8, "big", signed=True):
                check(payload == b"", "the end of replay carries a payload")
                break
            out.append((int.from_bytes(seq, "big"), payload))
        req.close(linger=0)
        return out

    def take(self, seq, payload):
        if seq in self.payloads:
            check(self.payloads[seq] == payload, f"replica {self.replica}: batch {seq} differs on replay")
            return
        missing = [s for s in range(len(self.payloads), seq) if s not in self.payloads]
        if missing:  # ZMQ's slow joiner, or a gap: take them from the replay socket first
            for s, p in self.replay(missing[0]):
                if s < seq and s not in self.payloads:
                    self.apply(s, p)
        check(seq == len(self.payloads), f"replica {self.replica}: batch {seq} after {len(self.payloads)} batches")
        self.apply(seq, payload)

    def apply(self, seq, payload):
        self.payloads[seq] = payload
        batch = DECODER.decode(payload)
        check(ENCODER.encode(batch) == payload, f"replica {self.replica}, batch {seq}: msgspec re-encodes other bytes")
        raw = msgpack.unpackb(payload, strict_map_key=False)
        check(isinstance(raw, list) and len(raw) == 3, f"an EventBatch of {raw!r:.80}")
        check(batch.data_parallel_rank == self.replica, f"data_parallel_rank {batch.data_parallel_rank}")
        check(abs(batch.ts - time.time()) < 600, f"ts {batch.ts}")
        for e in batch.events:
            if isinstance(e, BlockStored):
                self.on_stored(e)
            elif isinstance(e, BlockRemoved):
                check(e.medium == "GPU" and e.group_idx == 0, f"medium {e.medium}, group {e.group_idx}")
                for h in e.block_hashes:
                    check(h in self.cached, f"replica {self.replica}: removed {h}, which was not stored")
                    self.cached.discard(h)
                self.removed += len(e.block_hashes)
            else:
                self.cached.clear()
                self.cleared += 1

    def on_stored(self, e):
        check(e.block_size == BLOCK and e.medium == "GPU", f"block_size {e.block_size}, medium {e.medium}")
        check(e.lora_id is None and e.lora_name is None, "a LoRA on a base-model request")
        check(e.group_idx == 0 and e.kv_cache_spec_kind == "full_attention" and e.kv_cache_spec_sliding_window is None,
              f"group {e.group_idx}, spec {e.kv_cache_spec_kind} {e.kv_cache_spec_sliding_window}")
        check(e.extra_keys == [None] * len(e.block_hashes), f"extra_keys {e.extra_keys}")
        check(len(e.token_ids) == BLOCK * len(e.block_hashes), "token_ids are not block_size per hash")
        parent = None
        if e.parent_block_hash is not None:
            check(e.parent_block_hash in self.digests, f"parent {e.parent_block_hash} was never stored")
            parent = self.digests[e.parent_block_hash]
        for i, h in enumerate(e.block_hashes):
            parent = block_hash(parent, e.token_ids[i * BLOCK:(i + 1) * BLOCK])
            check(external(parent) == h, f"replica {self.replica}: hash {h} is not the chain of its tokens")
            check(h not in self.cached, f"replica {self.replica}: {h} stored twice")
            self.digests[h] = parent
            self.cached.add(h)
        self.stored += len(e.block_hashes)

    def predicted_hit_tokens(self, tokens):
        n = 0
        for h in prompt_hashes(tokens)[:(len(tokens) - 1) // BLOCK]:  # the last token is always computed
            if h not in self.cached:
                break
            n += 1
        return n * BLOCK


def main():
    troupe, model = sys.argv[1], sys.argv[2]
    port, pub, replay = free_port(), free_port_pair(), free_port_pair()
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{pub}",
              "replay_endpoint": f"tcp://*:{replay}", "buffer_steps": 100000, "topic": TOPIC}
    log = tempfile.NamedTemporaryFile(prefix="kv_events_serve_", suffix=".log", delete=False)
    server = subprocess.Popen([troupe, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
                               "--data-parallel-size", str(REPLICAS), "--num-gpu-blocks-override", "24",
                               "--max-num-seqs", "2", "--kv-events-config", json.dumps(config)],
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    ctx = zmq.Context()
    subs = [Subscriber(ctx, r, pub, replay) for r in range(REPLICAS)]
    try:
        for _ in range(600):
            try:
                if http(base, "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            check(server.poll() is None, "troupe serve exited; log: " + open(log.name).read()[-3000:])
            time.sleep(0.2)
        else:
            fail("troupe serve did not become healthy")
        rng = random.Random(5)
        prompts = [[rng.randrange(1, 500) for _ in range(rng.choice([40, 72, 100]))] for _ in range(6)]
        probes = 0
        for round_ in range(4):
            for i, p in enumerate(prompts):
                replica = (i + round_) % REPLICAS
                for s in subs:
                    s.drain(150)
                expected = subs[replica].predicted_hit_tokens(p)
                before = hits(base, replica)
                status, _ = http(base, "/v1/completions", {"prompt": p, "max_tokens": 3, "temperature": 0},
                                 headers={"X-data-parallel-rank": str(replica)})
                check(status == 200, f"completion status {status}")
                got = hits(base, replica) - before
                for _ in range(20):  # the stat logger actor may take a moment after the answer
                    if got == expected:
                        break
                    time.sleep(0.05)
                    got = hits(base, replica) - before
                check(got == expected, f"round {round_}, prompt {i} on replica {replica}: the server hit {got} "
                                       f"tokens, the events predicted {expected}")
                probes += 1
        for s in subs:
            s.drain(500)
        for s in subs:
            check(s.stored > 0 and s.removed > 0, f"replica {s.replica}: {s.stored} stored, {s.removed} removed "
                                                  "(the workload should evict)")
            again = s.replay(0)
            check([q for q, _ in again] == list(range(len(s.payloads))), f"replica {s.replica}: replay's sequence")
            check(all(s.payloads[q] == p for q, p in again), f"replica {s.replica}: replay's bytes differ")
        print(json.dumps({"probes": probes, "replicas": [
            {"batches": len(s.payloads), "stored": s.stored, "removed": s.removed, "cleared": s.cleared,
             "cached_now": len(s.cached)} for s in subs]}))
        print("PASS")
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        ctx.destroy(linger=0)
        os.unlink(log.name)


if __name__ == "__main__":
    main()
