#!/usr/bin/env python3
"""Replication measurements for docs/replication.md ("Measured").

  scripts/repl-bench.py [--bin target/release/durakv] [--records N]
      [--threads 64] [--seconds 30] [--runs 3] [--skip-fullsync]
      [--skip-levels]

1. Loads N records (`durakv bench ycsb load`) into a primary at `full`,
   attaches a replica (`--replicaof`), and times it until
   `master_link_status:up` and until DBSIZE and DEBUG DIGEST match; and
   what the sync cost in memory: how far the primary's peak RSS (VmHWM)
   rose above both its RSS and its peak before the sync, and the
   replica's peak RSS against its RSS once synced.
2. Runs YCSB workload A against the primary for --seconds, sampling the
   replication lag every 0.5 s (the primary's `master_repl_offset` minus
   the replica's `master_repl_offset` in INFO replication, read first, so
   the figure is an upper bound), and how long the
   replica needs to catch up after the run.
3. Unless --skip-levels: --runs runs each at `full` and at `replicated`
   (CONFIG SET durability on the primary), alternating, with the lag
   sampled during each.
4. With --stall S: one more run at `full` during which the replica is
   stopped (SIGSTOP) for S seconds from the 5th second; after SIGCONT it
   must drain what piled up while the primary keeps producing: the time it
   takes and the rate it applies the stream at.
5. With --attach-under-load: a second replica attaches while workload A
   runs; how long until its link is up and its lag is back under 1 MiB,
   and what the attach costs the primary's clients: the longest time in
   which the primary processed no more than 5 commands (INFO stats'
   `total_commands_processed`, sampled every 0.1 s), and the slowest 1 s
   against the median second.

Prints one line per figure. Servers and their directories are removed at
the end.
"""
import argparse
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Node:
    def __init__(self, binary, root, name, extra):
        self.port = free_port()
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.log = open(os.path.join(root, name + ".log"), "w")
        args = [
            "nice", "-n", "19", binary, "serve", "--port", str(self.port),
            "--dir", self.dir, "--enable-debug-command", "yes",
        ] + extra
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                self.conn().ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{name} did not start")
                time.sleep(0.05)

    def conn(self):
        return redis.Redis(port=self.port, socket_timeout=120)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def proc_kib(pid, field):
    """A /proc/<pid>/status field in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def repl_offset(c):
    return int(c.info("replication").get("master_repl_offset", 0))


def ycsb(binary, phase, port, records, threads, seconds=0):
    args = [
        "nice", "-n", "19", binary, "bench", "ycsb", phase, "redis",
        "-P", "workloads/workloada",
        "-p", f"recordcount={records}",
        "-p", f"redis.port={port}",
        "-threads", str(threads),
    ]
    if phase == "run":
        args += ["-p", "operationcount=0", "-p", f"maxexecutiontime={seconds}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("[OVERALL], Throughput(ops/sec)"):
            return float(line.split(",")[2])
    raise RuntimeError("no throughput in:\n" + out[-2000:])


def sample_lag(p, r, stop, out):
    while not stop.is_set():
        try:
            # The replica first: the difference is then an upper bound.
            behind = repl_offset(r)
            out.append(repl_offset(p) - behind)
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.5)


def loaded_run(binary, p_node, r_node, threads, seconds, records):
    p, r = p_node.conn(), r_node.conn()
    samples, stop = [], threading.Event()
    t = threading.Thread(target=sample_lag, args=(p, r, stop, samples))
    t.start()
    ops = ycsb(binary, "run", p_node.port, records, threads, seconds)
    stop.set()
    t.join()
    end = repl_offset(p)
    started = time.time()
    while repl_offset(r) < end:
        time.sleep(0.05)
    catch_up = time.time() - started
    return ops, samples, catch_up


def describe(samples):
    if not samples:
        return "no samples"
    s = sorted(samples)
    return (f"median {statistics.median(s) / 1024:.1f} KiB, "
            f"p95 {s[int(len(s) * 0.95) - 1] / 1024:.1f} KiB, "
            f"max {s[-1] / 1024:.1f} KiB, last {samples[-1] / 1024:.1f} KiB "
            f"({len(s)} samples)")


def stall_run(binary, p_node, r_node, args):
    p, r = p_node.conn(), r_node.conn()
    result = {}

    def load():
        result["ops"] = ycsb(binary, "run", p_node.port, args.records,
                             args.threads, 5 + args.stall + 20)

    t = threading.Thread(target=load)
    t.start()
    time.sleep(5)
    applied_from = repl_offset(r)
    os.kill(r_node.proc.pid, signal.SIGSTOP)
    time.sleep(args.stall)
    produced_from = repl_offset(p)
    behind = produced_from - applied_from
    os.kill(r_node.proc.pid, signal.SIGCONT)
    resumed = time.time()
    while repl_offset(p) - repl_offset(r) > 1 << 20:
        if time.time() - resumed > 120:
            break
        time.sleep(0.05)
    took = time.time() - resumed
    applied = repl_offset(r) - applied_from
    produced = repl_offset(p) - produced_from
    t.join()
    print(f"replica stopped {args.stall} s under load: {behind / 2**20:.1f} MiB "
          f"behind; back under 1 MiB {took:.1f} s after SIGCONT, applying "
          f"{applied / took / 2**20:.1f} MiB/s while the primary produced "
          f"{produced / took / 2**20:.1f} MiB/s; run {result.get('ops', 0):.0f} ops/s",
          flush=True)


def sample_commands(c, stop, out):
    while not stop.is_set():
        try:
            n = int(c.info("stats")["total_commands_processed"])
            out.append((time.time(), n))
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.1)


def longest_stall(samples):
    """The longest span over which at most 5 commands were processed."""
    best = 0.0
    j = 0
    for i in range(len(samples)):
        j = max(j, i)
        while j + 1 < len(samples) and samples[j + 1][1] - samples[i][1] <= 5:
            j += 1
        if j + 1 < len(samples):
            best = max(best, samples[j + 1][0] - samples[i][0])
    return best


def per_second(samples, since, until):
    """Commands per whole second between two times."""
    rates = []
    t = since
    while t + 1 <= until:
        inside = [n for (ts, n) in samples if t <= ts <= t + 1]
        if len(inside) >= 2:
            rates.append(inside[-1] - inside[0])
        t += 1
    return rates


def attach_run(binary, root, p_node, nodes, args):
    p = p_node.conn()
    result = {}
    counts, stop = [], threading.Event()
    sampler = threading.Thread(target=sample_commands,
                               args=(p_node.conn(), stop, counts))
    sampler.start()

    def load():
        result["ops"] = ycsb(binary, "run", p_node.port, args.records,
                             args.threads, 60)

    t = threading.Thread(target=load)
    t.start()
    time.sleep(5)
    t0 = time.time()
    r_node = Node(binary, root, "replica2",
                  ["--replicaof", f"127.0.0.1 {p_node.port}"])
    nodes.append(r_node)
    r = r_node.conn()
    while r.info("replication").get("master_link_status") != "up":
        if time.time() - t0 > 120:
            print("second replica: link not up after 120 s", flush=True)
            t.join()
            return
        time.sleep(0.05)
    up = time.time() - t0
    samples = []
    while t.is_alive():
        behind = repl_offset(r)
        samples.append(repl_offset(p) - behind)
        if samples[-1] < 1 << 20 and "caught" not in result:
            result["caught"] = time.time() - t0
        time.sleep(0.5)
    t.join()
    stop.set()
    sampler.join()
    before = per_second(counts, counts[0][0], t0)
    during = per_second(counts, t0, t0 + up)
    attach = [c for c in counts if t0 - 0.5 <= c[0] <= t0 + up + 0.5]
    print(f"replica attached under load: link up after {up:.1f} s, lag under "
          f"1 MiB after {result.get('caught', -1):.1f} s; lag while up "
          f"{describe(samples)}; run {result.get('ops', 0):.0f} ops/s", flush=True)
    if before and during:
        print(f"primary while the replica attached: longest stall "
              f"{longest_stall(attach):.2f} s; slowest second {min(during)} "
              f"commands against a median of {statistics.median(before):.0f} "
              f"before the attach", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/durakv")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-levels", action="store_true")
    ap.add_argument("--only-fullsync", action="store_true")
    ap.add_argument("--stall", type=int, default=0)
    ap.add_argument("--attach-under-load", action="store_true")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    root = tempfile.mkdtemp(prefix="repl-bench-")
    nodes = []
    try:
        primary = Node(binary, root, "primary", ["--durability", "full"])
        nodes.append(primary)
        t0 = time.time()
        ycsb(binary, "load", primary.port, args.records, args.threads)
        print(f"load {args.records} records: {time.time() - t0:.1f} s", flush=True)
        p = primary.conn()
        primary_rss = proc_kib(primary.proc.pid, "VmRSS")
        primary_hwm = proc_kib(primary.proc.pid, "VmHWM")
        t0 = time.time()
        replica = Node(binary, root, "replica",
                       ["--replicaof", f"127.0.0.1 {primary.port}"])
        nodes.append(replica)
        r = replica.conn()
        while r.info("replication").get("master_link_status") != "up":
            time.sleep(0.05)
        up = time.time() - t0
        want = p.dbsize()
        while r.dbsize() != want:
            time.sleep(0.05)
        # Before DEBUG DIGEST, which takes memory of its own.
        print(f"memory during the full sync: primary peak RSS "
              f"{(proc_kib(primary.proc.pid, 'VmHWM') - max(primary_rss, primary_hwm)) / 1024:+.0f} MiB "
              f"over its {primary_rss / 1024:.0f} MiB (and over its peak while "
              f"loading); replica peak {proc_kib(replica.proc.pid, 'VmHWM') / 1024:.0f} MiB, "
              f"{proc_kib(replica.proc.pid, 'VmRSS') / 1024:.0f} MiB after", flush=True)
        digest_p = p.execute_command("DEBUG", "DIGEST")
        while r.execute_command("DEBUG", "DIGEST") != digest_p:
            time.sleep(0.1)
        print(f"full sync of {want} keys: link up after {up:.1f} s, "
              f"converged (DBSIZE and DEBUG DIGEST) after {time.time() - t0:.1f} s",
              flush=True)
        print(f"load average: {os.getloadavg()}", flush=True)
        for name in ("primary", "replica"):
            with open(os.path.join(root, name + ".log")) as f:
                for line in f:
                    if "full sync" in line or "full resync" in line:
                        print(f"{name} log: {line.strip()[-160:]}", flush=True)
        if args.only_fullsync:
            return
        ops, samples, catch_up = loaded_run(
            binary, primary, replica, args.threads, args.seconds, args.records)
        print(f"workload A at full: {ops:.0f} ops/s; lag {describe(samples)}; "
              f"caught up {catch_up:.2f} s after the run", flush=True)
        if not args.skip_levels:
            res = {"full": [], "replicated": []}
            for i in range(args.runs):
                for level in ("full", "replicated"):
                    p.config_set("durability", level)
                    ops, samples, catch_up = loaded_run(
                        binary, primary, replica, args.threads, args.seconds,
                        args.records)
                    res[level].append(ops)
                    print(f"run {i + 1} {level}: {ops:.0f} ops/s; lag "
                          f"{describe(samples)}; caught up {catch_up:.2f} s; "
                          f"load average {os.getloadavg()[0]:.1f}", flush=True)
            for level, v in res.items():
                print(f"{level}: {', '.join(f'{x:.0f}' for x in v)} ops/s, "
                      f"median {statistics.median(v):.0f}", flush=True)
        p.config_set("durability", "full")
        if args.stall:
            stall_run(binary, primary, replica, args)
        if args.attach_under_load:
            attach_run(binary, root, primary, nodes, args)
        digest_p = p.execute_command("DEBUG", "DIGEST")
        deadline = time.time() + 120
        while r.execute_command("DEBUG", "DIGEST") != digest_p:
            if time.time() > deadline:
                print("replica did NOT converge", flush=True)
                sys.exit(1)
            time.sleep(0.1)
        print("replica converged (DEBUG DIGEST equal)", flush=True)
    finally:
        for n in nodes:
            n.stop()
        if args.keep_logs:
            for n in nodes:
                shutil.rmtree(n.dir, ignore_errors=True)
            print(f"logs in {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
