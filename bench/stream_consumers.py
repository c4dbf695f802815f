#!/usr/bin/env python3
"""Consumer-group throughput: N processes doing XREADGROUP COUNT 10 + XACK.

Issue 13's "XREADGROUP + XACK throughput" measure, run by bench/streams.sh.

usage: stream_consumers.py fill HOST PORT KEY ENTRIES
           appends ENTRIES entries (one 16-byte field) in pipelines of 1,000
       stream_consumers.py run HOST PORT KEY GROUP CONSUMERS SECONDS
           creates GROUP at 0, then CONSUMERS processes, each on its own
           connection, loop XREADGROUP GROUP GROUP c<i> COUNT 10 STREAMS KEY >
           and XACK of the IDs they got, for SECONDS (or until the stream is
           drained); prints `acked=N seconds=S per_s=R`
Each consumer waits for the reply before sending the next command, so every
XREADGROUP and XACK is a write that waits for the server's durability.
"""

import multiprocessing as mp
import sys
import time

import redis

BATCH = 1000
READ_COUNT = 10


def fill(host, port, key, entries):
    r = redis.Redis(host=host, port=port)
    done = 0
    while done < entries:
        p = r.pipeline(transaction=False)
        n = min(BATCH, entries - done)
        for i in range(n):
            p.xadd(key, {"payload": f"{done + i:016d}"})
        p.execute()
        done += n
    print(f"filled={r.xlen(key)}")


def consumer(host, port, key, group, name, start, seconds, out):
    r = redis.Redis(host=host, port=port)
    r.ping()
    start.wait()
    deadline = time.monotonic() + seconds
    acked = 0
    while time.monotonic() < deadline:
        got = r.xreadgroup(group, name, {key: ">"}, count=READ_COUNT)
        if not got or not got[0][1]:
            break
        ids = [entry_id for entry_id, _ in got[0][1]]
        acked += r.xack(key, group, *ids)
    out.put(acked)


def run(host, port, key, group, consumers, seconds):
    redis.Redis(host=host, port=port).xgroup_create(key, group, id="0")
    start = mp.Event()
    out = mp.Queue()
    procs = [
        mp.Process(target=consumer, args=(host, port, key, group, f"c{i}", start, seconds, out))
        for i in range(consumers)
    ]
    for p in procs:
        p.start()
    time.sleep(0.5)  # every consumer connected before the clock starts
    t0 = time.monotonic()
    start.set()
    total = sum(out.get() for _ in procs)
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join()
    print(f"acked={total} seconds={elapsed:.2f} per_s={total / elapsed:.0f}")


if __name__ == "__main__":
    mode, host, port, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "fill":
        fill(host, port, key, int(sys.argv[5]))
    else:
        run(host, port, key, sys.argv[5], int(sys.argv[6]), float(sys.argv[7]))
