#!/usr/bin/env python3
"""PUBLISH fan-out: 1 publisher, SUBS subscribers, durakv against Redis 7.

Each run starts a fresh server on a free loopback port (durakv with a fresh
data directory; Redis with --save '' --appendonly no), connects SUBS raw
RESP2 subscribers to one channel, then publishes N messages with
redis-benchmark (one connection, pipelined -P 16). The subscribers are read
by this process with one selector; a run ends when every subscriber has
received all N messages. Reported: messages delivered per second (N * SUBS
over the time from the first publish to the last byte), median of RUNS runs,
the servers alternating run by run.

usage: bench/pubsub_fanout.py [--durakv target/release/durakv] [--runs 3]
       [--subs 50] [-n 20000] [--payload 16]
"""

import argparse
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CHANNEL = b"fanout"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("server did not start")


def start(kind, binary, port, tmp):
    if kind == "durakv":
        cmd = [binary, "serve", "--port", str(port), "--dir", tmp]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", tmp]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc


def message_bytes(payload):
    p = len(payload)
    return len(b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n" % (len(CHANNEL), CHANNEL, p)) + p + 2


def run(kind, binary, subs, n, payload):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="fanout-")
    proc = start(kind, binary, port, tmp)
    try:
        socks = []
        for _ in range(subs):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL))
            confirm = b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL)
            got = b""
            while len(got) < len(confirm):
                got += s.recv(len(confirm) - len(got))
            s.setblocking(False)
            socks.append(s)
        want = n * message_bytes(payload)
        sel = selectors.DefaultSelector()
        remaining = {}
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
            remaining[s] = want
        pub = subprocess.Popen(
            ["redis-benchmark", "-p", str(port), "-c", "1", "-P", "16", "-n", str(n), "-q",
             "PUBLISH", CHANNEL.decode(), payload.decode()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start_t = time.perf_counter()
        deadline = start_t + 60
        while remaining and time.perf_counter() < deadline:
            for key, _ in sel.select(timeout=1):
                s = key.fileobj
                data = s.recv(1 << 20)
                if not data:
                    sys.exit("a subscriber was disconnected")
                remaining[s] -= len(data)
                if remaining[s] <= 0:
                    sel.unregister(s)
                    del remaining[s]
        elapsed = time.perf_counter() - start_t
        pub.wait(timeout=60)
        if remaining:
            sys.exit(f"{kind}: {len(remaining)} subscribers short after 60 s")
        for s in socks:
            s.close()
        return n * subs / elapsed
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--durakv", default="target/release/durakv")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--subs", type=int, default=50)
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--payload", type=int, default=16)
    a = ap.parse_args()
    if not os.path.exists(a.durakv):
        sys.exit(f"{a.durakv} not found (cargo build --release -p durakv)")
    payload = b"x" * a.payload
    rates = {"durakv": [], "redis": []}
    for i in range(a.runs):
        for kind in ("durakv", "redis"):
            r = run(kind, a.durakv, a.subs, a.n, payload)
            rates[kind].append(r)
            print(f"run {i + 1} {kind}: {r:,.0f} msg/s", flush=True)
    for kind, rs in rates.items():
        print(f"{kind}: median {statistics.median(rs):,.0f} messages delivered/s "
              f"({a.subs} subscribers, {a.n} publishes, {a.payload}-byte payload)")


if __name__ == "__main__":
    main()
