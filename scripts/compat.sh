#!/usr/bin/env bash
# Client compatibility check: runs the stock Redis tools and redis-py against
# a durakv binary.
#
#   scripts/compat.sh [path/to/durakv]
#
# Without an argument it builds (if cargo is available) and uses
# target/release/durakv.
# Needs redis-cli and redis-benchmark (Debian/Ubuntu: redis-tools) and
# redis-py (pip install redis). Starts durakv on a free loopback port with a
# temporary data directory, stops it on exit, and exits non-zero on the
# first failure with a message saying what differed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

note() {
    echo "== $*"
}

# --- Locate or build the binary -------------------------------------------

if [[ $# -ge 1 ]]; then
    BIN=$1
    [[ -x $BIN ]] || fail "no executable durakv at '$BIN'"
else
    BIN=$ROOT/target/release/durakv
    # Rebuild when cargo is around (a no-op if current) so a stale binary is
    # never tested; without cargo, an existing binary is used as is.
    if command -v cargo >/dev/null; then
        note "cargo build --release -p durakv"
        (cd "$ROOT" && cargo build --release -p durakv) || fail "cargo build --release -p durakv failed"
    fi
    [[ -x $BIN ]] || fail "no $BIN and no cargo to build it; pass the binary's path"
fi

for tool in redis-cli redis-benchmark python3; do
    command -v "$tool" >/dev/null || fail "'$tool' not found (install redis-tools / python3)"
done
python3 -c 'import redis' 2>/dev/null || fail "redis-py is not installed (pip install redis)"
python3 -c 'import prometheus_client' 2>/dev/null || fail "prometheus_client is not installed (pip install prometheus_client)"

# --- Start the server -------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/durakv-compat.XXXXXX")
SERVER_PID=""

stop_server() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

cleanup() {
    local status=$?
    stop_server
    if [[ $status -ne 0 && -s $WORK/server.err ]]; then
        echo "--- last lines of the server's log ---" >&2
        tail -n 20 "$WORK/server.err" >&2
    fi
    rm -rf "$WORK"
    exit $status
}
trap cleanup EXIT INT TERM

# Port 0 lets the kernel pick a free port; durakv prints the one it bound.
# DEBUG is on (from loopback only) for Redis's slowlog and latency units.
"$BIN" serve --bind 127.0.0.1 --port 0 --dir "$WORK/data" --enable-debug-command local \
    >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 100); do
    # The background shell may not have created server.out yet.
    [[ -f $WORK/server.out ]] &&
        PORT=$(sed -n 's/^durakv listening on port \([0-9][0-9]*\)$/\1/p' "$WORK/server.out" | head -n 1)
    [[ -n $PORT ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "durakv exited during start-up"
    sleep 0.1
done
[[ -n $PORT ]] || fail "durakv did not report a listening port within 10s"
note "durakv $("$BIN" --version 2>/dev/null | awk '{print $2}') on 127.0.0.1:$PORT ($BIN)"

# --- 1. redis-cli one-liners -------------------------------------------------

# cli_is EXPECTED ARGS...: redis-cli's output must equal EXPECTED exactly.
cli_is() {
    local expect=$1
    shift
    local got
    got=$(redis-cli -p "$PORT" "$@" 2>&1) || fail "redis-cli $* exited non-zero: $got"
    if [[ $got != "$expect" ]]; then
        fail "redis-cli $*
  expected: $(printf '%q' "$expect")
  got:      $(printf '%q' "$got")"
    fi
}

note "redis-cli"
cli_is PONG ping
cli_is OK set foo bar
cli_is bar get foo
cli_is 1 incr counter
cli_is 2 incr counter
cli_is 12 incrby counter 10
cli_is 2 hset h f1 v1 f2 v2
cli_is v1 hget h f1
# Field order is not part of HGETALL's contract; compare pairs sorted.
got=$(redis-cli -p "$PORT" hgetall h | paste - - | sort)
[[ $got == $'f1\tv1\nf2\tv2' ]] || fail "redis-cli hgetall h: got $(printf '%q' "$got")"
cli_is 3 lpush l a b c
cli_is $'c\nb\na' lrange l 0 -1
cli_is 2 zadd z 1 one 2.5 two
cli_is $'one\n1\ntwo\n2.5' zrange z 0 -1 withscores
cli_is OK set t v EX 100
cli_is 1 expire t 50
ttl=$(redis-cli -p "$PORT" ttl t)
[[ $ttl =~ ^[0-9]+$ && $ttl -ge 48 && $ttl -le 50 ]] || fail "redis-cli ttl t: expected 48..50, got '$ttl'"
cli_is -2 ttl never-set
cli_is string type foo
cli_is "(nil)" --no-raw get missing
cli_is "(integer) 1" --no-raw exists foo
cli_is "(error) ERR value is not an integer or out of range" --no-raw incr foo
cli_is "(error) WRONGTYPE Operation against a key holding the wrong kind of value" --no-raw lpush foo x
cli_is "(error) ERR unknown command 'nosuch', with args beginning with: 'a' " --no-raw nosuch a
cli_is "(error) ERR wrong number of arguments for 'get' command" --no-raw get
cli_is OK -n 3 set dbkey in-db3
cli_is in-db3 -n 3 get dbkey
cli_is "(nil)" --no-raw get dbkey
cli_is "(error) ERR DB index is out of range" --no-raw select 999
got=$(redis-cli -p "$PORT" info server | tr -d '\r' | grep '^redis_version:')
[[ $got == "redis_version:7.2.4" ]] || fail "info server | grep redis_version: got '$got'"
got=$(redis-cli -p "$PORT" info keyspace | tr -d '\r' | grep '^db3:')
[[ $got == db3:keys=1,* ]] || fail "info keyspace: expected a db3 line, got '$got'"
cli_is $'maxclients\n10000' config get maxclients
# The backup modes: a snapshot over the replication protocol, whole or
# functions only (Redis's RDB format, checksummed; durakv keeps none).
got=$(redis-cli -p "$PORT" --rdb "$WORK/dump.rdb" 2>&1) || fail "redis-cli --rdb: $got"
head -c 5 "$WORK/dump.rdb" | grep -q REDIS || fail "redis-cli --rdb wrote no RDB file"
grep -q dbkey "$WORK/dump.rdb" || fail "redis-cli --rdb: the file lacks key dbkey"
cli_is backuplib function load $'#!lua name=backuplib\nredis.register_function(\'bf\', function() return 1 end)'
got=$(redis-cli -p "$PORT" --functions-rdb "$WORK/functions.rdb" 2>&1) || fail "redis-cli --functions-rdb: $got"
grep -q backuplib "$WORK/functions.rdb" || fail "redis-cli --functions-rdb: the file lacks the library"
! grep -q dbkey "$WORK/functions.rdb" || fail "redis-cli --functions-rdb: the file holds keys"
cli_is OK function flush

# --- 2. redis-benchmark ------------------------------------------------------

note "redis-benchmark"
TESTS=set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset
bench_status=0
redis-benchmark -p "$PORT" -t "$TESTS" -n 20000 -q >"$WORK/bench.out" 2>&1 || bench_status=$?
# -q rewrites its progress line with CR; keep only the final results.
tr '\r' '\n' <"$WORK/bench.out" | grep -E 'requests per second|rror|ERR|WARN' >"$WORK/bench.txt" || true
cat "$WORK/bench.txt"
[[ $bench_status -eq 0 ]] || fail "redis-benchmark exited with status $bench_status: $(tail -n 3 "$WORK/bench.out")"
if grep -Eqi 'error|ERR|WARNING' "$WORK/bench.txt"; then
    fail "redis-benchmark reported errors: $(grep -Ei 'error|ERR|WARNING' "$WORK/bench.txt" | head -n 3)"
fi
for name in SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN \
    "LRANGE_100 (first 100 elements)" "LRANGE_300 (first 300 elements)" \
    "LRANGE_500 (first 500 elements)" "LRANGE_600 (first 600 elements)" "MSET (10 keys)"; do
    grep -Fq "$name: " "$WORK/bench.txt" || fail "redis-benchmark did not complete the $name test"
done

# --- 3. redis-py ---------------------------------------------------------------

note "redis-py"
python3 "$ROOT/scripts/compat.py" "$PORT" || fail "scripts/compat.py failed (see above)"

# redis-py's Sentinel client following a failover of three durakv servers
# by three redis-sentinels (its own servers; skips without redis-sentinel).
note "redis-py Sentinel failover"
python3 "$ROOT/scripts/sentinel-failover.py" "$BIN" || fail "scripts/sentinel-failover.py failed (see above)"

# The Prometheus endpoint, parsed by Prometheus's own Python client (its
# own server, on free ports).
note "Prometheus endpoint"
python3 "$ROOT/scripts/metrics-check.py" "$BIN" || fail "scripts/metrics-check.py failed (see above)"

# --- 4. Redis's own test units -------------------------------------------------

# Redis 7.0.15's units in external-server mode (see ../shared/redis-tests),
# when a copy is present: each unit must keep at least the ok count recorded
# in scripts/redis-tests-floor.txt, and the server must survive them all.
REDIS_TESTS=${REDIS_TESTS:-$ROOT/../shared/redis-tests}
# Every unit of Redis's baseline that runs against an external server
# (the list, zset and stream ones take about three and a half minutes of
# the whole), then the blocks below that need a private copy, then
# unit/introspection.
DEFAULT_UNITS="unit/type/string unit/type/hash unit/type/incr unit/keyspace unit/multi unit/expire \
unit/info-command unit/protocol unit/quit unit/scan unit/introspection-2 unit/pubsub unit/tracking unit/pause unit/type/set unit/functions unit/scripting \
unit/type/list unit/type/list-2 unit/type/list-3 unit/type/zset unit/type/stream unit/type/stream-cgroups \
unit/sort unit/geo unit/bitops unit/bitfield unit/hyperloglog unit/dump"
# run_units UNITS DIR: one run.sh pass, its lines added to units.txt.
run_units() {
    PORT=$PORT UNITS=$1 OUTDIR=$WORK/redis-tests "$2/run.sh" | tee -a "$WORK/units.txt"
}
if [[ -x $REDIS_TESTS/run.sh ]] && command -v tclsh >/dev/null; then
    : >"$WORK/units.txt"
    if [[ -n ${REDIS_UNITS:-} ]]; then
        note "Redis's test units ($REDIS_UNITS)"
        run_units "$REDIS_UNITS" "$REDIS_TESTS"
    else
        note "Redis's test units ($DEFAULT_UNITS)"
        run_units "$DEFAULT_UNITS" "$REDIS_TESTS"
        # unit/acl is tagged external:skip as a whole because its later
        # blocks start servers of their own; its first block (72 tests)
        # runs against any server, so a private copy drops the tag there.
        cp -r "$REDIS_TESTS" "$WORK/redis-tests-acl"
        sed -i '1s/ external:skip//' "$WORK/redis-tests-acl/tests/unit/acl.tcl"
        note "Redis's unit/acl, first block"
        run_units unit/acl "$WORK/redis-tests-acl"
        # unit/slowlog and unit/latency-monitor time DEBUG SLEEP and check
        # the redaction of passwords; run.sh leaves out the tests tagged
        # needs:debug, needs:latency and needs:repl, so a private copy
        # keeps them (this server has DEBUG on and nothing they need of a
        # replica).
        cp -r "$REDIS_TESTS" "$WORK/redis-tests-diag"
        sed -i 's/-needs:\(debug\|latency\|repl\) //g' "$WORK/redis-tests-diag/run.sh"
        note "Redis's unit/slowlog and unit/latency-monitor, with DEBUG"
        run_units "unit/slowlog unit/latency-monitor" "$WORK/redis-tests-diag"
        # Units tagged external:skip as a whole, although their first
        # block runs against any server (what the tag guards is a server
        # of their own in later blocks, or needing a fresh one): output
        # buffer limits, memory given back, INFO's error counts, AUTH,
        # sharded pub/sub, ACL selectors, maxmemory's policies and client
        # eviction. A private copy drops the tag from each first block, and
        # from every block of unit/maxmemory (those needing a replica fail
        # on Redis itself in this mode), and keeps the maxmemory tests
        # run.sh leaves out. unit/maxmemory goes last: it leaves maxmemory
        # set, which the next command clears; so does unit/client-eviction
        # with maxmemory-clients.
        cp -r "$REDIS_TESTS" "$WORK/redis-tests-more"
        for u in info auth pubsubshard acl-v2 obuf-limits memefficiency; do
            sed -i '0,/external:skip/{s/ "external:skip"//;s/ external:skip"/"/}' \
                "$WORK/redis-tests-more/tests/unit/$u.tcl"
        done
        sed -i 's/ "external:skip"//;s/ external:skip"/"/' "$WORK/redis-tests-more/tests/unit/maxmemory.tcl"
        # unit/client-eviction's blocks all run against any server. Its
        # last two tests fill a client's output buffer by sending GETs it
        # never reads; durakv runs none of a client's commands while its
        # replies wait for the socket, so that buffer never grows past one
        # turn's replies and the tests would loop until the unit times out.
        sed -i 's/tags {"external:skip"}/tags {}/' "$WORK/redis-tests-more/tests/unit/client-eviction.tcl"
        sed -i 's/-needs:config-maxmemory //;s|--tags "\$tags"|--tags "$tags" --skiptest "/^client total memory grows"|' \
            "$WORK/redis-tests-more/run.sh"
        note "Redis's units that external mode skips whole, first blocks"
        run_units "unit/other unit/lazyfree unit/info unit/auth unit/pubsubshard unit/acl-v2 unit/obuf-limits unit/memefficiency" "$WORK/redis-tests-more"
        # unit/obuf-limits leaves normal clients' output limited to 100 KB
        # (each of Redis's units expects a fresh server): unit/client-eviction
        # reads 200 KB replies, so Redis's defaults go back first.
        cli_is OK config set client-output-buffer-limit "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        run_units unit/client-eviction "$WORK/redis-tests-more"
        cli_is OK config set maxmemory-clients 0
        run_units unit/maxmemory "$WORK/redis-tests-more"
        cli_is OK config set maxmemory 0
        # Last: its CONFIG tests leave maxmemory set for whatever follows.
        note "Redis's unit/introspection"
        run_units unit/introspection "$REDIS_TESTS"
    fi
    while read -r unit floor; do
        [[ -z $unit || $unit == \#* ]] && continue
        line=$(grep "^UNIT $unit " "$WORK/units.txt" || true)
        [[ -z $line ]] && continue
        ok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$line")
        log=$WORK/redis-tests/$(tr / _ <<<"$unit").log
        if [[ $line == *timeout* ]]; then
            # The logs go with the temporary directory: show where it hung.
            tail -n 15 "$log" >&2 || true
            fail "$unit timed out: $line"
        fi
        if ((ok < floor)); then
            grep -E -A4 '^\[(err|exception)\]' "$log" >&2 || true
            fail "$unit: $ok tests pass, fewer than the $floor recorded in scripts/redis-tests-floor.txt"
        fi
    done <"$ROOT/scripts/redis-tests-floor.txt"
else
    note "Redis's test units skipped: no $REDIS_TESTS/run.sh or no tclsh (apt-get install tcl)"
fi

# The server must still be up after all of that.
cli_is PONG ping
kill -0 "$SERVER_PID" 2>/dev/null || fail "durakv died during the run"

note "all compatibility checks passed"
