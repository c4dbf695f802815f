#!/usr/bin/env python3
"""The Prometheus endpoint, read by Prometheus's own client library.

    python3 scripts/metrics-check.py [DURAKV_BINARY]

Starts a durakv with `--metrics-port`, writes through redis-py, and parses
what GET /metrics returns with prometheus_client's text parser (the
exposition format's reference implementation in Python). It then checks
that the numbers agree with INFO, counters are counters, and the fsync
histogram is consistent (cumulative buckets, +Inf == _count == wal_fsyncs).
Exits non-zero with a message naming the first check that failed.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import redis
from prometheus_client.parser import text_string_to_metric_families


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        check(resp.status == 200, f"status {resp.status}")
        ctype = resp.headers.get("Content-Type", "")
        check(ctype.startswith("text/plain; version=0.0.4"), f"Content-Type {ctype!r}")
        return resp.read().decode()


def families(text):
    try:
        return {f.name: f for f in text_string_to_metric_families(text)}
    except ValueError as e:
        fail(f"prometheus_client cannot parse the exposition: {e}")


def value(fams, family, sample_name, **labels):
    for s in fams[family].samples:
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    fail(f"no sample {sample_name}{labels} in family {family}")


def main():
    root_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root_dir, "target/release/durakv")
    if not os.access(binary, os.X_OK):
        fail(f"no executable durakv at {binary}")
    port, metrics_port = free_port(), free_port()
    work = tempfile.mkdtemp(prefix="durakv-metrics-")
    log = open(os.path.join(work, "durakv.log"), "w")
    proc = subprocess.Popen(
        [binary, "serve", "--port", str(port), "--metrics-port", str(metrics_port),
         "--dir", os.path.join(work, "data")],
        stdout=log, stderr=log,
    )
    try:
        r = redis.Redis(port=port, socket_timeout=10, decode_responses=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                r.ping()
                scrape(metrics_port)
                break
            except (redis.RedisError, OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    fail("durakv or its metrics endpoint did not come up")
                time.sleep(0.1)

        for i in range(100):
            r.set(f"m:{i}", "v")
        r.hset("m:h", mapping={"a": 1, "b": 2})
        r.get("m:1")
        r.get("m:missing")
        info = r.info("everything")
        fams = families(scrape(metrics_port))

        # prometheus_client drops the `_total` of a counter from its family
        # name and keeps it on the sample.
        for family, kind in [
            ("durakv_commands_processed", "counter"),
            ("durakv_wal_fsyncs", "counter"),
            ("durakv_cmdstat_calls", "counter"),
            ("durakv_used_memory", "gauge"),
            ("durakv_db_keys", "gauge"),
            ("durakv_role_info", "gauge"),
            ("durakv_wal_fsync_seconds", "histogram"),
        ]:
            check(family in fams, f"no family {family}")
            check(fams[family].type == kind, f"{family} is a {fams[family].type}, not a {kind}")

        check(value(fams, "durakv_db_keys", "durakv_db_keys", db="0") == 101, "db_keys{db=0}")
        check(value(fams, "durakv_cmdstat_calls", "durakv_cmdstat_calls_total", cmd="set") == 100,
              "cmdstat_calls_total{cmd=set}")
        check(value(fams, "durakv_keyspace_misses", "durakv_keyspace_misses_total") == 1,
              "keyspace_misses_total")
        check(value(fams, "durakv_role_info", "durakv_role_info", value="master") == 1, "role_info")
        fsyncs = value(fams, "durakv_wal_fsyncs", "durakv_wal_fsyncs_total")
        check(fsyncs >= info["wal_fsyncs"] >= 1, f"wal_fsyncs_total {fsyncs} < INFO's {info['wal_fsyncs']}")

        hist = fams["durakv_wal_fsync_seconds"]
        buckets = [(float(s.labels["le"]), s.value) for s in hist.samples
                   if s.name.endswith("_bucket") and s.labels.get("stream") == "0"]
        check(len(buckets) == 16 and buckets[-1][0] == float("inf"), f"buckets {buckets}")
        check(all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(buckets, buckets[1:])),
              f"buckets not cumulative: {buckets}")
        count = value(fams, "durakv_wal_fsync_seconds", "durakv_wal_fsync_seconds_count", stream="0")
        check(buckets[-1][1] == count == fsyncs, f"+Inf {buckets[-1][1]}, _count {count}, fsyncs {fsyncs}")
        total = value(fams, "durakv_wal_fsync_seconds", "durakv_wal_fsync_seconds_sum", stream="0")
        check(0 < total < 60, f"_sum {total}")
        print(f"ok: {len(fams)} metric families, {int(count)} fsyncs in the histogram")
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
