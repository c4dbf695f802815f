#!/usr/bin/env bash
# Runs `durakv bench compare`: Redis (AOF always / everysec / off), PostgreSQL
# (synchronous_commit on / off), SQLite (FULL / NORMAL) and durakv (full /
# delayed / none) on this machine, each on loopback with a fresh data
# directory; loads the same dataset, runs YCSB workload A and memtier 1:0 and
# 1:10, and prints one table (plus compare.csv, compare.json and SVG charts).
# Peers that are not installed are skipped with a hint; nothing is installed.
#
# usage: bench/compare.sh [compare options...]   (see --help)
# env:   BENCH="cmd ..." to use another build of the benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p durakv
if [ -z "${BENCH:-}" ]; then
    cargo build --release -q -p durakv-bench --example bench
    BENCH=target/release/examples/bench
fi
exec $BENCH compare --durakv-bin target/release/durakv "$@"
