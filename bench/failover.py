#!/usr/bin/env python3
"""Acknowledged writes lost in a Sentinel failover: durakv against Redis.

    bench/failover.py [--runs N] [--writers W] [--stall S] [--value-bytes B]
                      [--durakv PATH] [KIND...]

KIND is one of (default: all three)
  durakv-replicated  durakv at `replicated` with min-replicas-to-ack 2
  durakv-full        durakv at `full` (acknowledged after its own fsync)
  redis-always       redis-server with appendonly yes, appendfsync always

Each run starts a fresh primary, two replicas and three Sentinels (Debian's
redis-sentinel) on free loopback ports. W writer threads write through
redis-py's Sentinel client, each its own keys `w<t>:<n>` with value n
(padded to B bytes, default 1000), in order, retrying a write that got no
acknowledgement with the same value. After WARMUP_S both replicas are
stopped (SIGSTOP) for S seconds (default 2; 0: not at all): a replication
link that stalls or a replica machine that is slow, while clients still
reach the primary. Then the primary is killed with SIGKILL and the replicas
continued (SIGCONT): the primary's machine is lost with whatever of its
stream the replicas had not yet received. The writers follow
Sentinel to the new primary; the killed server is restarted from its own
directory once a new primary is named (Sentinel makes it a replica). After
AFTER_S more seconds of writes the writers stop and every acknowledged key
is read back from the new primary.

Printed per run: writes acknowledged, acknowledged writes missing or wrong
on the new primary, and the failover time (the kill to the first write
acknowledged that was sent after the killed process was gone). Then the
median of each per kind. Needs
redis-server, redis-sentinel and redis-py.
"""

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis
from redis.sentinel import Sentinel

MASTER = "mymaster"
WARMUP_S = 4.0
AFTER_S = 3.0
KINDS = ("durakv-replicated", "durakv-full", "redis-always")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for(what, limit, f):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            v = f()
        except (redis.RedisError, OSError):
            v = None
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {limit} s: {what}")


class Node:
    """One durakv or redis-server, restartable from its own directory."""

    def __init__(self, kind, durakv, root, port, primary):
        self.kind, self.port = kind, port
        self.dir = os.path.join(root, f"node-{port}")
        os.makedirs(self.dir)
        if kind.startswith("durakv"):
            self.conf = os.path.join(self.dir, "durakv.toml")
            level = kind.split("-")[1]
            with open(self.conf, "w") as f:
                f.write(f'port = {port}\ndir = "{self.dir}/data"\n')
                f.write(f'durability = "{level}"\nmin-replicas-to-ack = 2\n')
                if primary:
                    f.write(f'replicaof = "127.0.0.1 {primary}"\n')
            self.argv = [durakv, "serve", "--config", self.conf]
        else:
            self.conf = os.path.join(self.dir, "redis.conf")
            with open(self.conf, "w") as f:
                f.write(f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nsave ''\n")
                f.write("appendonly yes\nappendfsync always\n")
                if primary:
                    f.write(f"replicaof 127.0.0.1 {primary}\n")
            self.argv = ["redis-server", self.conf]
        self.proc = None

    def start(self):
        log = open(os.path.join(self.dir, "server.log"), "a")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log)
        wait_for(f"{self.kind} on {self.port}", 30, lambda: self.conn().ping())

    def conn(self):
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def kill9(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None


def value(n, size):
    return str(n).ljust(size, "x")


class Writer(threading.Thread):
    def __init__(self, sentinel, t, stop, size):
        super().__init__(daemon=True)
        self.master = sentinel.master_for(MASTER, socket_timeout=2, decode_responses=True)
        self.t, self.stop, self.size, self.acked, self.ack_times = t, stop, size, 0, []

    def run(self):
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                self.master.set(f"w{self.t}:{self.acked}", value(self.acked, self.size))
            except (redis.RedisError, OSError):
                time.sleep(0.05)  # the same key and value again
                continue
            self.acked += 1
            self.ack_times.append((sent, time.monotonic()))


def one_run(kind, durakv, writers, stall, size):
    root = tempfile.mkdtemp(prefix="durakv-failover-")
    ports = free_ports(6)
    nodes, sentinels = [], []
    try:
        for i, p in enumerate(ports[:3]):
            nodes.append(Node(kind, durakv, root, p, None if i == 0 else ports[0]))
        for n in nodes:
            n.start()
        for p in ports[3:]:
            d = os.path.join(root, f"sentinel-{p}")
            os.makedirs(d)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write(f"port {p}\nbind 127.0.0.1\ndir {d}\nlogfile {d}/sentinel.log\n")
                f.write(f"sentinel monitor {MASTER} 127.0.0.1 {ports[0]} 2\n")
                f.write(f"sentinel down-after-milliseconds {MASTER} 1000\n")
                f.write(f"sentinel failover-timeout {MASTER} 5000\n")
            sentinels.append(subprocess.Popen(["redis-sentinel", conf],
                                              stdout=subprocess.DEVNULL))
        sentinel = Sentinel([("127.0.0.1", p) for p in ports[3:]], socket_timeout=1)

        def ready():
            for p in ports[3:]:
                s = redis.Redis(port=p, decode_responses=True)
                if sum(1 for r in s.sentinel_slaves(MASTER) if r["flags"] == "slave") != 2:
                    return False
                if len(s.sentinel_sentinels(MASTER)) != 2:
                    return False
            return True

        wait_for("every Sentinel knows 2 replicas and 2 Sentinels", 60, ready)
        stop = threading.Event()
        ws = [Writer(sentinel, t, stop, size) for t in range(writers)]
        for w in ws:
            w.start()
        time.sleep(WARMUP_S)
        old = sentinel.discover_master(MASTER)
        victim = next(n for n in nodes if n.port == old[1])
        replicas = [n for n in nodes if n is not victim]
        if stall > 0:
            for n in replicas:
                n.proc.send_signal(signal.SIGSTOP)
            time.sleep(stall)
        victim.kill9()
        for n in replicas:
            n.proc.send_signal(signal.SIGCONT)
        # After the process is gone: a write sent later cannot have been
        # acknowledged by it.
        killed_at = time.monotonic()
        wait_for("a new primary", 60, lambda: sentinel.discover_master(MASTER) != old)
        victim.start()
        def acked_since_kill(w):
            return [done for sent, done in w.ack_times if sent > killed_at]

        wait_for("a write acknowledged after the kill", 90,
                 lambda: any(acked_since_kill(w) for w in ws))
        time.sleep(AFTER_S)
        stop.set()
        for w in ws:
            w.join(10)
        failover_s = min(acked_since_kill(w)[0] - killed_at
                         for w in ws if acked_since_kill(w))
        new = sentinel.discover_master(MASTER)
        c = redis.Redis(port=new[1], decode_responses=True)
        acked = lost = 0
        for w in ws:
            keys = [f"w{w.t}:{n}" for n in range(w.acked)]
            for i in range(0, len(keys), 1000):
                vals = c.mget(keys[i:i + 1000])
                lost += sum(1 for j, v in enumerate(vals) if v != value(i + j, w.size))
            acked += w.acked
        return acked, lost, failover_s
    finally:
        for s in sentinels:
            s.kill()
            s.wait()
        for n in nodes:
            n.kill9()
        shutil.rmtree(root, ignore_errors=True)


def main():
    args = sys.argv[1:]
    opts = {"--runs": "3", "--writers": "8", "--stall": "2", "--value-bytes": "1000",
            "--durakv": None}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    root_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    durakv = opts["--durakv"] or os.path.join(root_dir, "target/release/durakv")
    kinds = args or list(KINDS)
    for k in kinds:
        if k not in KINDS:
            sys.exit(f"unknown kind {k}; one of {', '.join(KINDS)}")
    for tool in ("redis-server", "redis-sentinel"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    runs = int(opts["--runs"])
    summary = []
    for r in range(runs):
        for kind in kinds:  # alternating, run by run
            acked, lost, took = one_run(kind, durakv, int(opts["--writers"]),
                                        float(opts["--stall"]), int(opts["--value-bytes"]))
            print(f"{kind} run {r + 1}: {acked} writes acknowledged, {lost} of them "
                  f"missing on the new primary, failover {took:.2f} s", flush=True)
            summary.append((kind, acked, lost, took))
    print("\n| server | acknowledged (median) | lost, each run | failover s (median) |")
    print("|---|--:|---|--:|")
    for kind in kinds:
        rows = [s for s in summary if s[0] == kind]
        print(f"| {kind} | {statistics.median(s[1] for s in rows):.0f} | "
              f"{' / '.join(str(s[2]) for s in rows)} | "
              f"{statistics.median(s[3] for s in rows):.2f} |")


if __name__ == "__main__":
    main()
