#!/usr/bin/env bash
# Compares `durakv bench memtier` with redis-benchmark against one Redis 7
# on loopback, using the same connection count, value size and key range,
# both single-threaded clients. The load generator must not be the
# bottleneck: it should reach at least 90% of redis-benchmark's requests per
# second. Throughput on a shared machine is noisy, so the client CPU time
# per request (user + system, from /usr/bin/time) is reported too; it does
# not depend on what else the machine is doing.
#
# usage: bench/efficiency.sh [PORT] [ROUNDS]
# env:   BENCH="cmd ..."  how to run the benchmark (default: the crate's example binary)
set -euo pipefail
PORT=${1:-16379}
ROUNDS=${2:-3}
CLIENTS=50
REQUESTS=200000
SIZE=128
KEYS=1000000
cd "$(dirname "$0")/.."
for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install redis-server redis-tools)"; exit 1; }
done
[ -x /usr/bin/time ] || { echo "/usr/bin/time not found (apt-get install time)"; exit 1; }
if [ -z "${BENCH:-}" ]; then
    cargo build --release -q -p durakv-bench --example bench
    BENCH=target/release/examples/bench
fi
DIR=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" --daemonize yes \
    --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
cleanup() {
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    sleep 0.2
    rm -rf "$DIR"
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

per_client=$((REQUESTS / CLIENTS))
# Prints "<requests per second> <client cpu microseconds per request>".
redis_bench() {
    local out
    out=$( { /usr/bin/time -f 'CPU %U %S' redis-benchmark -p "$PORT" -t "$1" -c "$CLIENTS" -n "$REQUESTS" \
        -d "$SIZE" -r "$KEYS" -q; } 2>&1 | tr '\r' '\n')
    local rps cpu
    rps=$(echo "$out" | awk -v t="${1^^}:" '$1 == t && $3 == "requests" {print $2}')
    cpu=$(echo "$out" | awk '/^CPU/ {print $2 + $3}')
    echo "$rps $(echo "1000000*$cpu/$REQUESTS" | bc -l)"
}
ours() {
    local out
    out=$( { /usr/bin/time -f 'CPU %U %S' $BENCH memtier -s 127.0.0.1 -p "$PORT" -t 1 -c "$CLIENTS" \
        --ratio="$1" --requests="$per_client" -d "$SIZE" --key-maximum="$KEYS" --key-prefix=key: \
        --distinct-client-seed --hide-histogram; } 2>&1)
    local rps cpu
    rps=$(echo "$out" | awk '/^Totals/ {print $2}')
    cpu=$(echo "$out" | awk '/^CPU/ {print $2 + $3}')
    echo "$rps $(echo "1000000*$cpu/$REQUESTS" | bc -l)"
}
printf '%-6s %-4s %18s %18s %8s %16s %16s\n' round op "redis-benchmark/s" "durakv bench/s" ratio "rb cpu us/req" "ours cpu us/req"
for round in $(seq "$ROUNDS"); do
    for op in set get; do
        read -r rb_rps rb_cpu <<<"$(redis_bench "$op")"
        if [ "$op" = set ]; then ratio=1:0; else ratio=0:1; fi
        read -r mt_rps mt_cpu <<<"$(ours "$ratio")"
        printf '%-6s %-4s %18.0f %18.0f %7.1f%% %16.2f %16.2f\n' "$round" "$op" "$rb_rps" "$mt_rps" \
            "$(echo "100*$mt_rps/$rb_rps" | bc -l)" "$rb_cpu" "$mt_cpu"
    done
done
