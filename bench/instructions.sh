#!/usr/bin/env bash
# User-space instructions per request, for comparing builds (or durakv
# with Redis) on a machine whose speed moves from hour to hour.
#
# Throughput and even CPU time per request move by 5-15% between runs of
# the same binary on a shared 2-vCPU VM, more than most single changes
# to the request path are worth. An instruction count does not: each
# server runs under valgrind's callgrind, which counts every instruction
# its threads execute in user space (the kernel's work, cache misses and
# waits are not counted, so this complements bench/server_cpu.sh rather
# than replacing it). Each server starts fresh on a free loopback port,
# is warmed with 100,000 SETs, has its counters zeroed, serves N requests
# of TEST from redis-benchmark, and has its counts dumped; printed per
# server are the instructions per request and the callgrind file, which
# `callgrind_annotate --inclusive=yes FILE` breaks down by function. The
# same binary and load give the same count within about 0.1%.
#
# usage: bench/instructions.sh TEST LEVEL SERVER...
#   TEST    a redis-benchmark test (set, get, incr, ...)
#   LEVEL   durakv's --durability (full, delayed, none); for Redis, full
#           means `appendfsync always` and anything else no AOF
#   SERVER  a durakv binary, or `redis` for redis-server
# env:   N=200000 requests, PIPE=16 (-P), CLIENTS=50 (-c), SIZE=128 (-d),
#        KEYS=1000000 (-r); OUT: where the callgrind files are kept
#        (default a new directory under /tmp)
# e.g.:  bench/instructions.sh set none /tmp/durakv-before target/release/durakv redis
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,25p' "$0"; exit 2; }
TEST=$1 LEVEL=$2
shift 2
SERVERS=("$@")
N=${N:-200000} PIPE=${PIPE:-16} CLIENTS=${CLIENTS:-50} SIZE=${SIZE:-128} KEYS=${KEYS:-1000000}
cd "$(dirname "$0")/.."
DURAKV=${SERVERS[0]}
[ "$DURAKV" = redis ] && DURAKV=target/release/durakv
. bench/peers.sh
for tool in valgrind callgrind_control callgrind_annotate redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install valgrind redis-tools)"; exit 1; }
done
OUT=${OUT:-$(mktemp -d /tmp/durakv-instructions.XXXXXX)}
mkdir -p "$OUT"

bench() {
    redis-benchmark -p "$1" -t "$2" -n "$3" -P "$PIPE" -c "$CLIENTS" -d "$SIZE" -r "$KEYS" -q >/dev/null 2>&1
}

# one SERVER INDEX: prints "instructions-per-request callgrind-file".
one() {
    local server=$1 port dir file total
    port=$(free_port)
    dir=$TMP/s$2
    rm -rf "$dir" && mkdir -p "$dir"
    # Under valgrind a start takes seconds.
    WAIT_TENTHS=600 start_peer "$server" "$port" "$dir" "$LEVEL" \
        valgrind --tool=callgrind --callgrind-out-file="$OUT/s$2.%p.out"
    bench "$port" set 100000
    [ "$TEST" = set ] || bench "$port" "$TEST" 20000
    callgrind_control -z "$PID" >/dev/null 2>&1
    bench "$port" "$TEST" "$N"
    callgrind_control -d "$PID" >/dev/null 2>&1
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null || true
    PID=
    # The dump taken on request is the one numbered .1.
    file=$(ls -t "$OUT"/s"$2".*.out.1 | head -1)
    total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
    echo "$((total / N)) $file"
}

echo "redis-benchmark -t $TEST -n $N -P $PIPE -c $CLIENTS -d $SIZE -r $KEYS, durability $LEVEL, under callgrind"
printf '%-40s %22s  %s\n' server "instructions/request" "callgrind file"
for i in "${!SERVERS[@]}"; do
    read -r per file < <(one "${SERVERS[$i]}" "$i")
    printf '%-40s %22s  %s\n' "${SERVERS[$i]}" "$per" "$file"
done
