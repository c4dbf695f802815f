#!/usr/bin/env bash
# What checkpoints cost writers (issue 11, point 5): write throughput while
# BGSAVEs run back to back, against the same server's steady state, with
# the default settings.
#
# One durakv (defaults, fresh directory, loopback). RECORDS YCSB records are
# loaded first (`durakv bench ycsb load`), so every checkpoint writes them
# all. Then, ROUNDS times, alternating:
#   steady  `durakv bench memtier --ratio 1:0 -t 4 -c 50 -d 128` on keys
#           1..1,000,000 for TEST_TIME seconds;
#   bgsave  the same, while a loop sends BGSAVE, waits for
#           rdb_bgsave_in_progress:0, and sends the next one.
# Printed: each run's ops/s and p99, the checkpoints the bgsave runs
# completed, the medians, and bgsave / steady.
#
# usage: bench/checkpoint_impact.sh [RECORDS] [ROUNDS]   (defaults 1000000 3)
# env:   DURAKV=target/release/durakv  TEST_TIME=20
#        DURAKV_ARGS="..."  extra flags for the server
set -euo pipefail
RECORDS=${1:-1000000}
ROUNDS=${2:-3}
TEST_TIME=${TEST_TIME:-20}
cd "$(dirname "$0")/.."
. bench/peers.sh

port=$(free_port)
# shellcheck disable=SC2086
"$DURAKV" serve --port "$port" --dir "$TMP/data" ${DURAKV_ARGS:-} >"$TMP/server.log" 2>&1 &
PID=$!
until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do
    kill -0 "$PID" 2>/dev/null || { cat "$TMP/server.log"; exit 1; }
    sleep 0.05
done
"$DURAKV" bench ycsb load redis -P workloads/workloada -p recordcount="$RECORDS" \
    -p redis.port="$port" -threads 64 >/dev/null

# One memtier write run: "ops p99".
writes() {
    "$DURAKV" bench memtier -s 127.0.0.1 -p "$port" --ratio 1:0 -t 4 -c 50 -d 128 \
        --key-minimum 1 --key-maximum 1000000 --test-time "$TEST_TIME" \
        --json-out-file "$TMP/memtier.json" >/dev/null 2>&1
    python3 - "$TMP/memtier.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["ALL STATS"]["Totals"]["stats"]
print(f'{t["Ops/sec"]:.0f} {t["Percentile Latencies"].get("p99.00", 0)}')
EOF
}

# BGSAVE back to back until the file STOP appears; prints how many finished.
saves() {
    local n=0
    while [ ! -e "$TMP/stop" ]; do
        redis-cli -p "$port" bgsave >/dev/null
        # Polled twice a second: each poll starts two processes, which at
        # 20 a second took a few percent of this 2-core machine from the
        # server in this mode only.
        sleep 0.5
        while redis-cli -p "$port" info persistence | grep -q '^rdb_bgsave_in_progress:1'; do
            sleep 0.5
        done
        n=$((n + 1))
    done
    echo "$n"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: >"$TMP/steady"
: >"$TMP/bgsave"
printf '%-6s %-7s %9s %9s %12s\n' round mode ops/s p99_ms checkpoints
for r in $(seq 1 "$ROUNDS"); do
    read -r ops p99 < <(writes)
    echo "$ops" >>"$TMP/steady"
    printf '%-6s %-7s %9s %9s %12s\n' "$r" steady "$ops" "$p99" -
    rm -f "$TMP/stop"
    saves >"$TMP/saves" &
    saver=$!
    read -r ops p99 < <(writes)
    touch "$TMP/stop"
    wait "$saver"
    echo "$ops" >>"$TMP/bgsave"
    printf '%-6s %-7s %9s %9s %12s\n' "$r" bgsave "$ops" "$p99" "$(cat "$TMP/saves")"
done
s=$(median <"$TMP/steady")
b=$(median <"$TMP/bgsave")
echo "median steady $s ops/s, with back-to-back BGSAVE $b ops/s: $(python3 -c "print(f'{$b / $s:.2f}')")x"
