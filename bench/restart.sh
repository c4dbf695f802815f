#!/usr/bin/env bash
# Restart time from a snapshot, durakv against Redis 7, with the same data.
#
# For each server: start fresh on a free loopback port, load RECORDS YCSB
# records with `durakv bench ycsb load redis` (ten 100-byte fields, one HSET
# plus `ZADD _indices` per record), SAVE (durakv: a checkpoint; Redis: an
# RDB), stop, then start again and time it. Reported per server:
#   load_s   the server's own figure for reading its snapshot (durakv:
#            "loaded checkpoint ... in Xs"; Redis: "DB loaded from disk: Xs")
#   ready_s  from exec to the first PING answered with PONG (Redis answers
#            -LOADING until it is done)
#   rec/s    RECORDS / load_s
# The runs are repeated ROUNDS times and the median is printed.
#
# Between restarts each server is stopped as STOP says:
#   crash  kill -9 (the default): a restart after a crash, from the saved
#          snapshot (durakv also scans its log; there is nothing after it)
#   clean  SIGTERM: durakv takes a shutdown checkpoint first (Redis with
#          `--save ''` saves nothing), and the next start loads that
#
# usage: bench/restart.sh [RECORDS] [ROUNDS]     (defaults 1000000 3)
# env:   DURAKV=target/release/durakv  STOP=crash|clean
#        SERVERS="durakv redis" (either alone to measure one build; the
#        ratio line needs both)
set -euo pipefail
RECORDS=${1:-1000000}
ROUNDS=${2:-3}
STOP=${STOP:-crash}
case "$STOP" in crash | clean) ;; *) echo "STOP must be crash or clean" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
. bench/peers.sh

# start KIND PORT DIR LOG: starts a server in the background, sets PID.
start() {
    if [ "$1" = durakv ]; then
        "$DURAKV" serve --port "$2" --dir "$3" >"$4" 2>&1 &
    else
        redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --dir "$3" \
            --dbfilename dump.rdb >"$4" 2>&1 &
    fi
    PID=$!
}

# Seconds until PING answers PONG.
wait_ready() {
    local t0=$1 port=$2
    while true; do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then
            python3 -c "import time; print(f'{time.time() - $t0:.3f}')"
            return
        fi
        kill -0 "$PID" 2>/dev/null || { echo "server exited"; exit 1; }
        sleep 0.01
    done
}

# stop [clean]: stops the server as STOP says (clean: always SIGTERM).
stop() {
    if [ "${1:-$STOP}" = crash ]; then
        kill -9 "$PID"
    else
        kill "$PID"
    fi
    wait "$PID" 2>/dev/null || true
    PID=
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-7s %9s %9s %9s %12s\n' server records load_s ready_s rec/s
for kind in ${SERVERS:-durakv redis}; do
    dir="$TMP/$kind"
    mkdir -p "$dir"
    port=$(free_port)
    start "$kind" "$port" "$dir" "$dir/first.log"
    wait_ready "$(date +%s.%N)" "$port" >/dev/null
    "$DURAKV" bench ycsb load redis -threads 16 -p recordcount="$RECORDS" \
        -p redis.port="$port" >/dev/null
    # A checkpoint the load started may still be running, and SAVE then
    # answers an error (as Redis does during a BGSAVE); wait it out.
    until [ "$(redis-cli -p "$port" save)" = OK ]; do sleep 1; done
    stop
    loads=() readies=()
    for _ in $(seq "$ROUNDS"); do
        log="$dir/restart.log"
        t0=$(date +%s.%N)
        start "$kind" "$port" "$dir" "$log"
        ready=$(wait_ready "$t0" "$port")
        if [ "$kind" = durakv ]; then
            load=$(sed -n 's/.*loaded checkpoint .* in \([0-9.]*\)s.*/\1/p' "$log" | head -1)
        else
            load=$(sed -n 's/.*DB loaded from disk: \([0-9.]*\) seconds.*/\1/p' "$log" | head -1)
        fi
        loads+=("$load") readies+=("$ready")
        stop
    done
    load=$(printf '%s\n' "${loads[@]}" | median)
    ready=$(printf '%s\n' "${readies[@]}" | median)
    rate=$(python3 -c "print(int($RECORDS / $load))")
    printf '%-7s %9s %9s %9s %12s\n' "$kind" "$RECORDS" "$load" "$ready" "$rate"
    eval "load_$kind=$load ready_$kind=$ready"
done
if [ -n "${load_durakv:-}" ] && [ -n "${load_redis:-}" ]; then
    python3 -c "print(f'durakv / Redis: load {$load_durakv / $load_redis:.2f}x, ready {$ready_durakv / $ready_redis:.2f}x')"
fi
