#!/usr/bin/env python3
"""Whether memory freed by deleting data shows in `used_memory` again.

`maxmemory` and INFO judge a server by `used_memory`; a server that keeps
the memory of deleted keys (in its tables, buffers or logs) refuses writes
under `noeviction`, or evicts keys, long after the data is gone. Each
server starts fresh on a free loopback port (durakv with an empty data
directory and its default durability, `full`, so the log's buffers count
too; Redis with no persistence), then:

  keys        MSET 100,000 small keys (1,000 per command)
  deleted     DEL all but 100 of them
  flushed     FLUSHALL
  big values  100 pipelined SETs of 100 KB, then FLUSHALL
  slowlog     slowlog-log-slower-than 0, five SADDs of 100,000 members,
              each key DELeted

and prints `used_memory` after each step less the fresh server's, the
median over RUNS runs (servers alternate run by run).

usage: bench/memory_release.py [RUNS] [SERVER...]
  SERVER  a durakv binary, or `redis` (default: target/release/durakv redis)
Needs redis-py and, for `redis`, redis-server on PATH.
"""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

STEPS = ["keys", "deleted", "flushed", "big values", "slowlog"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(server, port, data):
    if server == "redis":
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--dir", data]
    else:
        cmd = [server, "serve", "--port", str(port), "--dir", data,
               "--wal-segment-size-mb", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return proc, r
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"{server} did not start")


def used(r):
    # Both servers sample some figures in the background; let them settle.
    time.sleep(1.2)
    return r.info("memory")["used_memory"]


def one_run(server):
    data = tempfile.mkdtemp(prefix="memrel-")
    port = free_port()
    proc, r = start(server, port, data)
    try:
        fresh = used(r)
        out = {}
        p = r.pipeline(transaction=False)
        for i in range(0, 100_000, 1_000):
            p.mset({f"key:{j}": j for j in range(i, i + 1_000)})
        p.execute()
        out["keys"] = used(r) - fresh
        for i in range(0, 100_000, 1_000):
            p.delete(*[f"key:{j}" for j in range(i, i + 1_000) if j >= 100])
        p.execute()
        out["deleted"] = used(r) - fresh
        r.flushall()
        out["flushed"] = used(r) - fresh
        for i in range(100):
            p.set(f"big:{i}", "v" * 100_000)
        p.execute()
        r.flushall()
        out["big values"] = used(r) - fresh
        r.config_set("slowlog-log-slower-than", 0)
        members = [f"member-{i}" for i in range(100_000)]
        for i in range(5):
            r.sadd(f"set:{i}", *members)
            r.delete(f"set:{i}")
        out["slowlog"] = used(r) - fresh
        return out
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def main():
    args = sys.argv[1:]
    runs = int(args.pop(0)) if args and args[0].isdigit() else 3
    servers = args or ["target/release/durakv", "redis"]
    results = {s: [] for s in servers}
    for _ in range(runs):
        for s in servers:
            results[s].append(one_run(s))
    print(f"used_memory above a fresh server, bytes, median of {runs}")
    print(f"{'server':<40}" + "".join(f"{st:>13}" for st in STEPS))
    for s in servers:
        meds = [statistics.median(r[st] for r in results[s]) for st in STEPS]
        print(f"{os.path.basename(s) if s != 'redis' else 'redis':<40}"
              + "".join(f"{int(m):>13}" for m in meds))


if __name__ == "__main__":
    main()
