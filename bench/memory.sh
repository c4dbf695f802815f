#!/usr/bin/env bash
# Memory per record, durakv against Redis 7, with the same loaders.
#
# Each server starts fresh on a free loopback port (durakv with an empty
# data directory; Redis with --save '' --appendonly no). Its resident set
# (VmRSS) is read before and after a load, and the growth is divided by the
# number of records. Each loader runs against a fresh server:
#   ycsb     `durakv bench ycsb load redis`: RECORDS YCSB records of ten
#            100-byte fields (one HSET plus `ZADD _indices` per record)
#   memtier  `durakv bench memtier`: RECORDS SETs of 128-byte values on keys
#            memtier-0 .. memtier-(RECORDS-1)
#   set      `redis-benchmark -t sadd`: one set, members element:N for
#            random N below RECORDS (5 x RECORDS adds, so nearly all of them)
#   zset     `redis-benchmark -t zadd`: one sorted set, members as above
#   board    `redis-benchmark ... zadd board`: one sorted set of 36-byte
#            members (player:<12 digits>:<16 hex>, as long as a UUID),
#            a leaderboard's shape, past durakv's 23-byte inline keys
#   hash     `redis-benchmark -t hset -d 16`: one hash, fields as above,
#            16-byte values
#   list     `redis-benchmark -t lpush -d 16`: one list of 5 x RECORDS
#            16-byte elements
# The growth is divided by the records (keys, or members or elements of
# the one collection).
# MEMORY USAGE of one sample key of each load is printed beside it.
#
# usage: bench/memory.sh [RECORDS]          (default 200000)
# env:   DURAKV=target/release/durakv       the server and load generator
#        LOADERS="ycsb memtier set zset board hash list"   the loads to run
set -euo pipefail
RECORDS=${1:-200000}
cd "$(dirname "$0")/.."
. bench/peers.sh

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# start KIND PORT: starts a fresh server in the background, sets PID.
start() {
    local dir="$TMP/$1-$2"
    mkdir -p "$dir"
    if [ "$1" = durakv ]; then
        "$DURAKV" serve --port "$2" --dir "$dir" >"$dir/log" 2>&1 &
    else
        redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
            >"$dir/log" 2>&1 &
    fi
    PID=$!
    for _ in $(seq 100); do
        redis-cli -p "$2" ping >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "$1 did not start"; cat "$dir/log"; exit 1
}

stop() {
    kill "$PID"; wait "$PID" 2>/dev/null || true
    PID=
}

load() {
    local loader=$1 port=$2
    if [ "$loader" = ycsb ]; then
        "$DURAKV" bench ycsb load redis -threads 8 -p recordcount="$RECORDS" \
            -p redis.port="$port" >/dev/null
    elif [ "$loader" = board ]; then
        redis-benchmark -p "$port" -c 20 -P 16 -n $((5 * RECORDS)) -r "$RECORDS" \
            zadd board __rand_int__ player:__rand_int__:0123456789abcdef >/dev/null 2>&1
    elif [ "$loader" = memtier ]; then
        "$DURAKV" bench memtier -p "$port" -t 1 -c 8 --ratio 1:0 -d 128 --key-pattern P:P \
            --key-minimum 0 --key-maximum $((RECORDS - 1)) -n allkeys --hide-histogram >/dev/null 2>&1
    else
        local cmd=sadd
        [ "$loader" = zset ] && cmd=zadd
        [ "$loader" = hash ] && cmd=hset
        [ "$loader" = list ] && cmd=lpush
        redis-benchmark -p "$port" -t "$cmd" -c 20 -P 16 -n $((5 * RECORDS)) \
            -r "$RECORDS" -d 16 -q >/dev/null 2>&1
    fi
}

# Records loaded: keys, or the members or elements of the one collection.
records() {
    case "$1" in
    set) redis-cli -p "$2" scard myset ;;
    zset) redis-cli -p "$2" zcard myzset ;;
    board) redis-cli -p "$2" zcard board ;;
    hash) redis-cli -p "$2" hlen myhash ;;
    list) redis-cli -p "$2" llen mylist ;;
    *) redis-cli -p "$2" dbsize ;;
    esac
}

sample_key() {
    case "$1" in
    # Only the first line is wanted: the scan's SIGPIPE is no failure.
    ycsb) { redis-cli -p "$2" --scan --pattern 'user*' || true; } | head -1 ;;
    memtier) echo memtier-1 ;;
    set) echo myset ;;
    zset) echo myzset ;;
    board) echo board ;;
    hash) echo myhash ;;
    list) echo mylist ;;
    esac
}

printf '%-8s %-7s %10s %12s %14s %s\n' loader server records "rss_growth" "bytes/record" "MEMORY USAGE (sample key)"
for loader in ${LOADERS:-ycsb memtier set zset board hash list}; do
    for kind in durakv redis; do
        port=$(free_port)
        start "$kind" "$port"
        sleep 0.5
        before=$(rss_kib "$PID")
        load "$loader" "$port"
        sleep 1
        after=$(rss_kib "$PID")
        n=$(records "$loader" "$port")
        key=$(sample_key "$loader" "$port")
        usage=$(redis-cli -p "$port" memory usage "$key")
        growth=$(( (after - before) * 1024 ))
        printf '%-8s %-7s %10s %12s %14s %s\n' "$loader" "$kind" "$n" "$growth" \
            "$((growth / n))" "$usage ($key)"
        stop
    done
done
