#!/usr/bin/env bash
# Server CPU per request, for comparing builds (or durakv with Redis) on a
# shared machine where throughput alone moves by a quarter between runs.
#
# Each round starts every server fresh on a free loopback port, in turn,
# warms it with 200,000 SETs, then runs redis-benchmark against it and reads
# the server's CPU time (user + system, all threads) from /proc/PID/stat
# before and after. Printed per server: the median over ROUNDS of req/s and
# of server CPU microseconds per request, and each round's figures.
#
# usage: bench/server_cpu.sh TEST LEVEL ROUNDS SERVER...
#   TEST    a redis-benchmark test (set, get, incr, ...)
#   LEVEL   durakv's --durability (full, delayed, none); for Redis, full
#           means `appendfsync always` and anything else no AOF
#   SERVER  a durakv binary, or `redis` for redis-server
# env:   N=1000000 requests, PIPE=16 (-P), CLIENTS=50 (-c), SIZE=128 (-d),
#        KEYS=1000000 (-r)
# e.g.:  bench/server_cpu.sh set full 3 /tmp/durakv-before target/release/durakv
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,18p' "$0"; exit 2; }
TEST=$1 LEVEL=$2 ROUNDS=$3
shift 3
SERVERS=("$@")
N=${N:-1000000} PIPE=${PIPE:-16} CLIENTS=${CLIENTS:-50} SIZE=${SIZE:-128} KEYS=${KEYS:-1000000}
cd "$(dirname "$0")/.."
DURAKV=${SERVERS[0]}
[ "$DURAKV" = redis ] && DURAKV=target/release/durakv
. bench/peers.sh
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
TCK=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# one SERVER INDEX: one run; prints "req/s cpu_us_per_request".
one() {
    local server=$1 port dir rps t0 t1
    port=$(free_port)
    dir=$TMP/s$2
    rm -rf "$dir" && mkdir -p "$dir"
    if [ "$server" = redis ]; then
        local aof=(--appendonly no)
        [ "$LEVEL" = full ] && aof=(--appendonly yes --appendfsync always)
        redis-server --port "$port" --bind 127.0.0.1 --save '' "${aof[@]}" --dir "$dir" >"$dir/log" 2>&1 &
    else
        "$server" serve --port "$port" --dir "$dir/d" --durability "$LEVEL" \
            --wal-segment-size-mb 16 >"$dir/log" 2>&1 &
    fi
    PID=$!
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
        kill -0 "$PID" 2>/dev/null || { echo "$server exited:" >&2; tail -5 "$dir/log" >&2; exit 1; }
        sleep 0.1
    done
    redis-benchmark -p "$port" -t set -n 200000 -P 16 -c 50 -d "$SIZE" -r "$KEYS" -q >/dev/null 2>&1
    t0=$(cpu_ticks "$PID")
    rps=$(redis-benchmark -p "$port" -t "$TEST" -n "$N" -P "$PIPE" -c "$CLIENTS" -d "$SIZE" -r "$KEYS" --csv 2>/dev/null |
        tr -d '"' | awk -F, '$2 + 0 > 0 {print $2; exit}')
    t1=$(cpu_ticks "$PID")
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null || true
    PID=
    rm -rf "$dir"
    awk -v r="$rps" -v d=$((t1 - t0)) -v tck="$TCK" -v n="$N" \
        'BEGIN {printf "%.0f %.2f\n", r, d / tck * 1e6 / n}'
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A runs
for round in $(seq "$ROUNDS"); do
    for i in "${!SERVERS[@]}"; do
        r=$(one "${SERVERS[$i]}" "$i")
        runs[$i]="${runs[$i]:-}$r"$'\n'
        echo "round $round: ${SERVERS[$i]}: $r" >&2
    done
done
echo "redis-benchmark -t $TEST -n $N -P $PIPE -c $CLIENTS -d $SIZE -r $KEYS, durability $LEVEL, median of $ROUNDS"
printf '%-40s %12s %16s\n' server req/s "server CPU µs/req"
for i in "${!SERVERS[@]}"; do
    printf '%-40s %12s %16s\n' "${SERVERS[$i]}" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $1}' | median)" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $2}' | median)"
done
