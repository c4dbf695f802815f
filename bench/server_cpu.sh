#!/usr/bin/env bash
# Server CPU per request, for comparing builds (or durakv with Redis) on a
# shared machine where throughput alone moves by a quarter between runs.
#
# Each round starts every server fresh on a free loopback port, in turn,
# warms it with 200,000 SETs, then runs the load against it and reads the
# server's CPU time (user and system, all threads) from /proc/PID/stat
# before and after, and its context switches (voluntary and involuntary,
# all threads) from /proc/PID/task/*/status. Printed per server: the median
# over ROUNDS of req/s, of server CPU microseconds per request, of its user
# and system parts and of context switches per 1,000 requests, and each
# round's figures. Rounds alternate the servers' order (first to last, then
# last to first): in a fixed order, whichever ran first measured about 5%
# apart from the same binary run second.
#
# usage: bench/server_cpu.sh TEST LEVEL ROUNDS SERVER...
#   TEST    a redis-benchmark test (set, get, incr, ...), or memtier:RATIO
#           for `durakv bench memtier -t 4 -c 50 --ratio RATIO` over keys
#           1..5,000,000 (memtier:1:0 is write-only)
#   LEVEL   durakv's --durability (full, delayed, none); for Redis, full
#           means `appendfsync always` and anything else no AOF
#   SERVER  a durakv binary, or `redis` for redis-server
# env:   N=1000000 requests, PIPE=16 (-P), CLIENTS=50 (-c), SIZE=128 (-d),
#        KEYS=1000000 (-r); TEST_TIME=10 s for memtier; SLOWSYNC_US: run
#        the servers under ../shared/slowsync with that delay per fsync;
#        DATA_DIR: where the servers' directories go (default a temporary
#        directory; /dev/shm leaves the disk out, fsyncs cost nothing)
# e.g.:  bench/server_cpu.sh set full 3 /tmp/durakv-before target/release/durakv
#        SLOWSYNC_US=1000 bench/server_cpu.sh memtier:1:0 full 3 /tmp/before target/release/durakv
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,24p' "$0"; exit 2; }
TEST=$1 LEVEL=$2 ROUNDS=$3
shift 3
SERVERS=("$@")
N=${N:-1000000} PIPE=${PIPE:-16} CLIENTS=${CLIENTS:-50} SIZE=${SIZE:-128} KEYS=${KEYS:-1000000}
TEST_TIME=${TEST_TIME:-10}
cd "$(dirname "$0")/.."
DURAKV=${SERVERS[0]}
[ "$DURAKV" = redis ] && DURAKV=target/release/durakv
. bench/peers.sh
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
WRAP=()
if [ -n "${SLOWSYNC_US:-}" ]; then
    . bench/slowsync.sh
    WRAP=(env LD_PRELOAD="$(slowsync_so)" SLOWSYNC_US="$SLOWSYNC_US")
fi
MEMTIER_BIN=$DURAKV
[ -x "$MEMTIER_BIN" ] || MEMTIER_BIN=target/release/durakv
TCK=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# switches PID: the process's context switches so far, all threads.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/ {n += $2} END {print n}'; }

# load PORT: runs TEST against the server; prints "requests req/s".
load() {
    if [[ $TEST = memtier:* ]]; then
        "$MEMTIER_BIN" bench memtier -s 127.0.0.1 -p "$1" -t 4 -c 50 -d "$SIZE" \
            --ratio="${TEST#memtier:}" --test-time="$TEST_TIME" --key-prefix=kv_ \
            --key-minimum=1 --key-maximum=5000000 --distinct-client-seed \
            --json-out-file "$TMP/memtier.json" >/dev/null 2>&1
        python3 -c "import json, sys
t = json.load(open(sys.argv[1]))['ALL STATS']['Totals']['stats']
print(round(t['Ops/sec'] * float(sys.argv[2])), round(t['Ops/sec']))" "$TMP/memtier.json" "$TEST_TIME"
    else
        redis-benchmark -p "$1" -t "$TEST" -n "$N" -P "$PIPE" -c "$CLIENTS" -d "$SIZE" -r "$KEYS" --csv 2>/dev/null |
            tr -d '"' | awk -F, -v n="$N" '$2 + 0 > 0 {print n, $2; exit}'
    fi
}

# one SERVER INDEX: one run; prints "req/s cpu_us user_us sys_us" per
# request and context switches per 1,000 requests.
one() {
    local server=$1 port dir result t0 t1 c0 c1
    port=$(free_port)
    dir=${DATA_DIR:-$TMP}/durakv-cpu-s$2
    rm -rf "$dir" && mkdir -p "$dir"
    start_peer "$server" "$port" "$dir" "$LEVEL" "${WRAP[@]}"
    redis-benchmark -p "$port" -t set -n 200000 -P 16 -c 50 -d "$SIZE" -r "$KEYS" -q >/dev/null 2>&1
    t0=$(cpu_ticks "$PID")
    c0=$(switches "$PID")
    result=$(load "$port")
    t1=$(cpu_ticks "$PID")
    c1=$(switches "$PID")
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null || true
    PID=
    rm -rf "$dir"
    awk -v result="$result" -v t0="$t0" -v t1="$t1" -v tck="$TCK" -v cs=$((c1 - c0)) 'BEGIN {
        split(result, d, " "); split(t0, a, " "); split(t1, b, " ")
        u = (b[1] - a[1]) / tck * 1e6 / d[1]; s = (b[2] - a[2]) / tck * 1e6 / d[1]
        printf "%.0f %.2f %.2f %.2f %.1f\n", d[2], u + s, u, s, cs * 1000 / d[1] }'
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A runs
for round in $(seq "$ROUNDS"); do
    order=("${!SERVERS[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((j = ${#SERVERS[@]} - 1; j >= 0; j--)); do order+=("$j"); done
    fi
    for i in "${order[@]}"; do
        r=$(one "${SERVERS[$i]}" "$i")
        runs[$i]="${runs[$i]:-}$r"$'\n'
        echo "round $round: ${SERVERS[$i]}: $r" >&2
    done
done
if [[ $TEST = memtier:* ]]; then
    echo -n "durakv bench memtier -t 4 -c 50 -d $SIZE --ratio ${TEST#memtier:} --test-time $TEST_TIME, keys 1..5,000,000"
else
    echo -n "redis-benchmark -t $TEST -n $N -P $PIPE -c $CLIENTS -d $SIZE -r $KEYS"
fi
echo ", durability $LEVEL${SLOWSYNC_US:+, slowsync $SLOWSYNC_US µs}, median of $ROUNDS"
printf '%-40s %12s %18s %8s %8s %14s\n' server req/s "server CPU µs/req" user sys "switches/1000"
for i in "${!SERVERS[@]}"; do
    printf '%-40s %12s %18s %8s %8s %14s\n' "${SERVERS[$i]}" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $1}' | median)" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $2}' | median)" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $3}' | median)" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $4}' | median)" \
        "$(printf '%s' "${runs[$i]}" | awk 'NF {print $5}' | median)"
done
