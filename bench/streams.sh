#!/usr/bin/env bash
# Issue 13's consumer-group measure: XREADGROUP COUNT 10 + XACK throughput,
# durakv (default durability, full) against Redis 7 (appendonly yes,
# appendfsync always), both on 127.0.0.1 with a fresh temporary directory.
# Each server gets one stream of ENTRIES entries; each run creates a new
# group at 0 and has CONSUMERS connections read and acknowledge for RUN_SECONDS
# (bench/stream_consumers.py). Runs alternate durakv, Redis, durakv, ... so a
# noisy neighbour hits both alike; the median of RUNS runs is printed.
# Bounded: with the defaults, about a minute and a half.
#
# usage: bench/streams.sh
# env:   DURAKV_BIN=target/release/durakv (built if missing)
#        ENTRIES=200000 CONSUMERS=8 RUN_SECONDS=8 RUNS=3
set -euo pipefail
cd "$(dirname "$0")/.."

ENTRIES=${ENTRIES:-200000}
CONSUMERS=${CONSUMERS:-8}
RUN_SECONDS=${RUN_SECONDS:-8}
RUNS=${RUNS:-3}
DURAKV_BIN=${DURAKV_BIN:-target/release/durakv}
[[ -x $DURAKV_BIN ]] || cargo build --release -q -p durakv
command -v redis-server >/dev/null || { echo "needs redis-server (apt-get install redis-server)" >&2; exit 2; }
python3 -c 'import redis' 2>/dev/null || { echo "needs redis-py (pip install redis)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/durakv-streams.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
    for _ in $(seq 1 100); do
        redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2
    exit 1
}

DK_PORT=$(free_port)
mkdir -p "$WORK/durakv" "$WORK/redis"
"$DURAKV_BIN" serve --bind 127.0.0.1 --port "$DK_PORT" --dir "$WORK/durakv" >"$WORK/durakv.log" 2>&1 &
PIDS+=($!)
RD_PORT=$(free_port)
redis-server --bind 127.0.0.1 --port "$RD_PORT" --dir "$WORK/redis" --save '' \
    --appendonly yes --appendfsync always >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_port "$DK_PORT"
wait_port "$RD_PORT"

echo "durakv $("$DURAKV_BIN" --version | awk '{print $2}') ($DURAKV_BIN), $(redis-server --version | awk '{print $1, $2, $3}')"
echo "fill: $ENTRIES entries; then $RUNS x ($CONSUMERS consumers, XREADGROUP COUNT 10 + XACK, ${RUN_SECONDS}s)"
for name in durakv redis; do
    port=$DK_PORT; [[ $name == redis ]] && port=$RD_PORT
    start=$(date +%s.%N)
    python3 bench/stream_consumers.py fill 127.0.0.1 "$port" s "$ENTRIES" >/dev/null
    echo "  $name fill: $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5)s"
done

declare -A RATES
for run in $(seq 1 "$RUNS"); do
    for name in durakv redis; do
        port=$DK_PORT; [[ $name == redis ]] && port=$RD_PORT
        line=$(python3 bench/stream_consumers.py run 127.0.0.1 "$port" s "g$run" "$CONSUMERS" "$RUN_SECONDS")
        echo "  run $run $name: $line"
        RATES[$name]+="${line##*per_s=} "
    done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "entries acknowledged per second, median of $RUNS:"
echo "  durakv (durability full):            $(median "${RATES[durakv]}")"
echo "  Redis (appendonly, fsync always):    $(median "${RATES[redis]}")"
