#!/usr/bin/env python3
"""Failover of durakv by Debian's redis-sentinel, followed by redis-py's
Sentinel client.

    scripts/sentinel-failover.py [path/to/durakv] [--rounds N]

Starts a durakv primary, two durakv replicas and three Sentinels on free
loopback ports (temporary directories, everything stopped on exit). Each
round writes through `Sentinel.master_for()`, waits for both replicas
(WAIT 2), kills the primary with SIGKILL, keeps writing through the same
client until a write succeeds on the new primary, and prints the time from
the kill to that write. Then it restarts the old primary from its own
directory and configuration, waits until Sentinel has made it a replica and
all three servers hold the same data (DBSIZE, DEBUG DIGEST), and checks that
every write acknowledged before the kill is on the new primary. Exits
non-zero on the first failure. Needs redis-sentinel and redis-py.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import redis
from redis.sentinel import Sentinel

MASTER = "mymaster"
KEYS_PER_ROUND = 200


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


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
    while True:
        try:
            v = f()
        except (redis.RedisError, OSError):
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            fail(f"timed out after {limit} s: {what}")
        time.sleep(0.1)


class Node:
    def __init__(self, binary, root, port, replicaof):
        self.binary = binary
        self.port = port
        self.dir = os.path.join(root, f"node-{port}")
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "durakv.toml")
        with open(self.conf, "w") as f:
            f.write(f'port = {port}\ndir = "{self.dir}/data"\n')
            f.write('durability = "full"\nenable-debug-command = "yes"\n')
            if replicaof:
                f.write(f'replicaof = "127.0.0.1 {replicaof}"\n')
        self.proc = None

    def start(self):
        log = open(os.path.join(self.dir, "durakv.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", self.conf], stdout=log, stderr=log
        )
        wait_for(f"durakv on {self.port}", 20, lambda: self.conn().ping())

    def conn(self):
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def kill9(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None


def main():
    args = sys.argv[1:]
    rounds = 1
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i : i + 2]
    root_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = args[0] if args else os.path.join(root_dir, "target/release/durakv")
    if not os.access(binary, os.X_OK):
        fail(f"no executable durakv at {binary}")
    if not shutil.which("redis-sentinel"):
        print("skipping: redis-sentinel is not installed (apt-get install redis-sentinel)")
        return

    root = tempfile.mkdtemp(prefix="durakv-sentinel-")
    ports = free_ports(6)
    nodes, sentinels = [], []
    try:
        primary = ports[0]
        for i, p in enumerate(ports[:3]):
            nodes.append(Node(binary, root, p, None if i == 0 else primary))
        for n in nodes:
            n.start()
        for p in ports[3:]:
            d = os.path.join(root, f"sentinel-{p}")
            os.makedirs(d)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write(f"port {p}\nbind 127.0.0.1\ndir {d}\n")
                f.write(f"logfile {d}/sentinel.log\nloglevel verbose\n")
                f.write(f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n")
                f.write(f"sentinel down-after-milliseconds {MASTER} 1000\n")
                f.write(f"sentinel failover-timeout {MASTER} 5000\n")
            sentinels.append(subprocess.Popen(["redis-sentinel", conf]))
        sentinel = Sentinel([("127.0.0.1", p) for p in ports[3:]], socket_timeout=1)

        def knows_everything():
            for p in ports[3:]:
                s = redis.Redis(port=p, decode_responses=True)
                replicas = s.sentinel_slaves(MASTER)
                if sum(1 for r in replicas if r["flags"] == "slave") != 2:
                    return False
                if len(s.sentinel_sentinels(MASTER)) != 2:
                    return False
            return True

        wait_for("every Sentinel knows 2 replicas and 2 Sentinels", 30, knows_everything)

        written = 0
        for rnd in range(rounds):
            master = sentinel.master_for(MASTER, socket_timeout=1, decode_responses=True)
            old = sentinel.discover_master(MASTER)
            for _ in range(KEYS_PER_ROUND):
                master.set(f"k:{written}", f"v{written}")
                written += 1
            if master.execute_command("WAIT", 2, 10000) != 2:
                fail("WAIT 2 before the kill")
            victim = next(n for n in nodes if n.port == old[1])
            killed_at = time.monotonic()
            victim.kill9()

            def write_lands():
                master.set("probe", rnd)
                return True

            wait_for("a write through the Sentinel client succeeds", 60, write_lands)
            took = time.monotonic() - killed_at
            new = sentinel.discover_master(MASTER)
            if new == old:
                fail(f"the client still names {old}")
            print(f"round {rnd + 1}: failover {old[1]} -> {new[1]} in {took:.2f} s "
                  "(kill -9 to the first write accepted through redis-py's Sentinel client)")

            victim.start()

            def converged():
                addr = sentinel.discover_master(MASTER)
                roles = {n.port: n.conn().execute_command("ROLE") for n in nodes}
                if roles[addr[1]][0] != "master":
                    return None
                for p, r in roles.items():
                    if p != addr[1] and (r[0] != "slave" or r[2] != addr[1] or r[3] != "connected"):
                        return None
                digests = {(n.conn().dbsize(), n.conn().execute_command("DEBUG", "DIGEST"))
                           for n in nodes}
                return addr if len(digests) == 1 else None

            addr = wait_for("the old primary rejoins and all three converge", 60, converged)
            c = redis.Redis(port=addr[1], decode_responses=True)
            values = c.mget([f"k:{i}" for i in range(written)])
            lost = [i for i, v in enumerate(values) if v != f"v{i}"]
            if lost:
                fail(f"{len(lost)} acknowledged writes lost, first k:{lost[0]}")
            print(f"round {rnd + 1}: {written} acknowledged writes present; "
                  f"old primary {old[1]} rejoined as a replica of {addr[1]}")
        print("sentinel failover: OK")
    finally:
        for s in sentinels:
            s.kill()
            s.wait()
        for n in nodes:
            n.kill9()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
