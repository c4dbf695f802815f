#!/usr/bin/env bash
# Issue 10's benchmark: durakv against Redis 7 (the Debian package) on this
# machine, with and without durable writes, on the local disk and on
# emulated network block storage. Every server runs on 127.0.0.1 with a free
# port and a fresh temporary directory, and is stopped after each sample.
# Each measure runs RUNS times, alternating the servers (durakv, Redis,
# durakv, ...), so that a noisy neighbour on this shared machine hits both
# alike; the tables give the median of the runs. The report (Markdown) is
# printed at the end, ready for the README.
#
# usage: bench/durable.sh [MEASURE...]        (default: all, in this order)
#   local     redis-benchmark SET/GET, -P 1 and -P 16: durakv full/none, Redis always/no,
#             and a server that stores nothing (the client's ceiling on this machine)
#   slowsync  memtier 1:0 and 1:10 with 1 ms per fsync: durakv full, Redis always,
#             durakv none (no fsync) and a server that stores nothing
#   volumes   memtier write-only on 1, 2, 4 throttled volumes, and 2 dirs on 1 (root)
#   ycsb      YCSB workload A: durakv full, Redis always, local disk and slowsync;
#             durakv none on the local disk as the ceiling
#   conns     10,100 connections one after another (bench/conns.py); memtier at
#             3,200 connections against 200
#   reads     GETs beside a steady durable SET load, local disk and slowsync
#
# env (defaults are issue 10's settings; shrink them for a smoke test, e.g.
#      RUNS=1 N=20000 TEST_TIME=2 YCSB_RECORDS=5000 CONNS=300 READ_KEYS=5000 bench/durable.sh):
#   RUNS=3              samples per configuration
#   N=300000            redis-benchmark requests per run (local; GETs in reads)
#   TEST_TIME=15        seconds per memtier and YCSB run
#   SLOWSYNC_US=1000    delay added to every fsync under slowsync
#   YCSB_RECORDS=200000 YCSB records; YCSB_THREADS=64 connections
#   CONNS=10100         connections opened by the connection test
#   READ_KEYS=100000    key range of the GETs in `reads` (preloaded first)
#   VOL_MBPS=8          write bandwidth cap per volume; VOL_SIZE_MB=1024 per volume
#   CLIENT_TIMEOUT=600  seconds after which any one client run is killed
#   OUT=FILE            also write the report to FILE
#   DURAKV_ARGS=        extra flags for every durakv server, e.g. "--wal-preallocate fallocate"
set -euo pipefail
shopt -s inherit_errexit # a failing client inside $(...) stops the script too
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
N=${N:-300000}
TEST_TIME=${TEST_TIME:-15}
SLOWSYNC_US=${SLOWSYNC_US:-1000}
YCSB_RECORDS=${YCSB_RECORDS:-200000}
YCSB_THREADS=${YCSB_THREADS:-64}
CONNS=${CONNS:-10100}
READ_KEYS=${READ_KEYS:-100000}
VOL_MBPS=${VOL_MBPS:-8}
VOL_SIZE_MB=${VOL_SIZE_MB:-1024}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-600}
OUT=${OUT:-}

ALL_MEASURES=(local slowsync volumes ycsb conns reads)
VOLUMES_SH=$PWD/../shared/volumes/volumes.sh
DURAKV=${DURAKV:-target/release/durakv}
# memtier's key and value shape from the second seed report.
MEMTIER_KEYS=(--key-prefix=kv_ --key-minimum=1 --key-maximum=5000000 --distinct-client-seed
    --random-data --hide-histogram --print-percentiles=50,99)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

MEASURES=()
for arg in "$@"; do
    case " ${ALL_MEASURES[*]} " in
    *" $arg "*) MEASURES+=("$arg") ;;
    *) if [ "$arg" = -h ] || [ "$arg" = --help ]; then usage; exit 0; fi
        echo "unknown measure '$arg' (one of: ${ALL_MEASURES[*]})" >&2; exit 2 ;;
    esac
done
[ ${#MEASURES[@]} -gt 0 ] || MEASURES=("${ALL_MEASURES[@]}")

for tool in redis-server redis-benchmark redis-cli python3 timeout; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install redis-server redis-tools python3 coreutils)" >&2; exit 1; }
done

echo "building durakv..." >&2
cargo build --release -q -p durakv

# 10,100 connections need as many descriptors in the client and in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# ---------------------------------------------------------------------------
# Servers. One at a time: SRV_PID, SRV_PORT and SRV_DIR describe it. WRAP is a
# command prefix for the server only (the slowsync LD_PRELOAD, or volumes.sh
# run), never for the load generator.

WORK=$(mktemp -d "${TMPDIR:-/tmp}/durable-bench.XXXXXX")
REPORT=$WORK/report.md
VOLDIR=""      # set while throttled volumes are mounted
SRV_PID="" SRV_PORT="" SRV_DIR=""
WRITER_PID=""  # the background SET load of `reads`
WRAP=()

# Only the processes this script started and has not reaped yet: one server
# and at most one background client.
cleanup() {
    local pid
    for pid in $SRV_PID $WRITER_PID; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in $SRV_PID $WRITER_PID; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ -n "$VOLDIR" ]; then "$VOLUMES_SH" down "$VOLDIR" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until the server answers PING; fails with its log if it died.
wait_ready() {
    local i
    for i in $(seq 300); do
        if ! kill -0 "$SRV_PID" 2>/dev/null; then
            echo "server exited during start-up; its log:" >&2; tail -20 "$SRV_DIR/log" >&2; return 1
        fi
        [ "$(redis-cli -h 127.0.0.1 -p "$SRV_PORT" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "server on port $SRV_PORT not ready after 30 s" >&2; return 1
}

# start_server durakv|redis ARGS...: a fresh server with its own directory.
start_server() {
    local kind=$1; shift
    SRV_DIR=$(mktemp -d "$WORK/$kind.XXXXXX")
    SRV_PORT=$(free_port)
    if [ "$kind" = ceiling ]; then
        "$DURAKV" bench ceiling --port "$SRV_PORT" >"$SRV_DIR/log" 2>&1 &
    elif [ "$kind" = durakv ]; then
        "${WRAP[@]}" "$DURAKV" serve --bind 127.0.0.1 --port "$SRV_PORT" --dir "$SRV_DIR/data" \
            --maxclients 10000 --loglevel warning "$@" ${DURAKV_ARGS:-} >"$SRV_DIR/log" 2>&1 &
    else
        # --save '': no RDB snapshots, so only the AOF setting decides durability.
        "${WRAP[@]}" redis-server --bind 127.0.0.1 --port "$SRV_PORT" --dir "$SRV_DIR" --save '' \
            --maxclients 10000 --daemonize no --logfile '' "$@" >"$SRV_DIR/log" 2>&1 &
    fi
    SRV_PID=$!
    wait_ready
}

# The configurations compared; each name maps to a server and its flags.
start_config() {
    case "$1" in
    durakv-full) start_server durakv --durability full ;;
    durakv-none) start_server durakv --durability none ;;
    redis-always) start_server redis --appendonly yes --appendfsync always ;;
    redis-no) start_server redis --appendonly no ;;
    ceiling) start_server ceiling ;;
    wal-*) # durakv on the throttled volumes (measure_volumes); each sample starts on empty volumes.
        rm -rf "$VOLDIR"/vol*/wal*
        local dirs=() i
        case "$1" in
        wal-2on1) dirs=(--wal-dir "$VOLDIR/vol1/wal-a" --wal-dir "$VOLDIR/vol1/wal-b") ;;
        *) for i in $(seq "${1#wal-}"); do dirs+=(--wal-dir "$VOLDIR/vol$i/wal"); done ;;
        esac
        # The data directory (checkpoints) stays on the local disk: the logs are measured.
        start_server durakv --durability full --wal-segment-size-mb 16 "${dirs[@]}" ;;
    *) echo "unknown configuration $1" >&2; return 1 ;;
    esac
}

stop_server() {
    local i
    kill -TERM "$SRV_PID" 2>/dev/null || true
    for i in $(seq 100); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
    rm -rf "$SRV_DIR"
    SRV_PID="" SRV_PORT="" SRV_DIR=""
}

info_field() { # info_field NAME: one INFO field of the running server ("" if absent)
    redis-cli -h 127.0.0.1 -p "$SRV_PORT" info 2>/dev/null | tr -d '\r' | awk -F: -v k="$1" '$1 == k {print $2}'
}

use_slowsync() { # sets WRAP so that servers pay SLOWSYNC_US per fsync
    . bench/slowsync.sh
    WRAP=(env LD_PRELOAD="$(slowsync_so)" SLOWSYNC_US="$SLOWSYNC_US")
}

# ---------------------------------------------------------------------------
# Load generators. Each prints "name=value" fields parsed by `field`.

client() { timeout -k 5 "$CLIENT_TIMEOUT" "$@"; }

# rb ARGS...: redis-benchmark against the server; per test, "<TEST>_rps=..
# <TEST>_p50=.. <TEST>_p99=.." (latencies in ms).
rb() {
    client redis-benchmark -h 127.0.0.1 -p "$SRV_PORT" --csv "$@" >"$WORK/rb.out" 2>"$WORK/rb.err" ||
        { echo "redis-benchmark $* failed:" >&2; tail -5 "$WORK/rb.out" "$WORK/rb.err" >&2; return 1; }
    tr -d '"' <"$WORK/rb.out" |
        awk -F, '$1 ~ /^[A-Z]+$/ && $2 + 0 > 0 {printf "%s_rps=%s %s_p50=%s %s_p99=%s ", $1, $2, $1, $5, $1, $7}'
    echo
}

# memtier ARGS...: durakv's memtier against the server; "rps= p50= p99=
# get_p99= set_p99=" (ms), from its memtier-style JSON.
memtier() {
    local json=$WORK/memtier.json
    rm -f "$json"
    client "$DURAKV" bench memtier -s 127.0.0.1 -p "$SRV_PORT" --json-out-file "$json" "$@" >/dev/null 2>"$WORK/memtier.err" ||
        { cat "$WORK/memtier.err" >&2; return 1; }
    python3 - "$json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["ALL STATS"]
t, g, w = s["Totals"]["stats"], s["Gets"], s["Sets"]
p = lambda b, q: b["Percentile Latencies"].get(q, 0)
errors = t["Errors"] + s["Totals"]["Connection Errors"]
if errors:
    print(f"memtier: {errors} errors, e.g. {s['Totals']['Error Samples'][:2]}", file=sys.stderr)
print(f'rps={t["Ops/sec"]:.0f} p50={p(t, "p50.00")} p99={p(t, "p99.00")} '
      f'get_p99={p(g, "p99.00") if g["Count"] else "-"} set_p99={p(w, "p99.00") if w["Count"] else "-"} '
      f'errors={errors}')
EOF
}

# ycsb load|run ARGS...: YCSB workload A; "rps= read_p50= read_p99= update_p50=
# update_p99=" (ms) for run, "rps=" for load.
ycsb() {
    local phase=$1; shift
    client "$DURAKV" bench ycsb "$phase" redis -P workloads/workloada -threads "$YCSB_THREADS" \
        -p redis.host=127.0.0.1 -p redis.port="$SRV_PORT" -p recordcount="$YCSB_RECORDS" \
        -p hdrhistogram.percentiles=50,99 "$@" >"$WORK/ycsb.out" 2>"$WORK/ycsb.err" ||
        { echo "ycsb $phase failed:" >&2; tail -5 "$WORK/ycsb.out" "$WORK/ycsb.err" >&2; return 1; }
    awk -F', ' '
            $1 == "[OVERALL]" && $2 == "Throughput(ops/sec)" {printf "rps=%.0f ", $3}
            $2 ~ /^(50|99)thPercentileLatency/ && ($1 == "[READ]" || $1 == "[UPDATE]") {
                op = tolower(substr($1, 2, length($1) - 2)); q = substr($2, 1, 2)
                printf "%s_p%s=%.3f ", op, q, $3 / 1000 }
            $2 == "Return=ERROR" && $3 > 0 {printf "errors=%s ", $3}' "$WORK/ycsb.out"
    echo
}

field() { # field NAME "FIELDS": the value of NAME= in a line of fields
    local f
    for f in $2; do [ "${f%%=*}" = "$1" ] && { echo "${f#*=}"; return; }; done
    echo ""
}

# ---------------------------------------------------------------------------
# Samples and tables. `add KEY VALUE` records one run's figure; `med KEY`
# is the median of the runs ("" if none).

declare -A SAMPLES=()
add() { [ -n "$2" ] && [ "$2" != - ] && SAMPLES[$1]="${SAMPLES[$1]:-} $2"; return 0; }
# add_all PREFIX "FIELDS": every name=value of a result line under PREFIX/name.
add_all() { local f; for f in $2; do add "$1/${f%%=*}" "${f#*=}"; done; }
med() {
    printf '%s\n' ${SAMPLES[$1]:-} | sort -g | awk 'NF {v[n++] = $1}
        END {if (n) printf "%g", (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2)}'
}
num() { [ -n "$1" ] && printf '%.0f' "$1" || printf -- -; }   # ops/s
ms() { [ -n "$1" ] && printf '%.2f' "$1" || printf -- -; }    # milliseconds
ratio() { # ratio A B: A / B as "1.23×"
    if [ -n "$1" ] && [ -n "${2:-}" ] && awk -v b="$2" 'BEGIN {exit !(b > 0)}'; then
        awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'
    else printf -- -; fi
}
mnum() { num "$(med "$1")"; }   # median ops/s of KEY
mms() { ms "$(med "$1")"; }     # median milliseconds of KEY
mratio() { ratio "$(med "$1")" "$(med "$2")"; }
# row CELL...: one Markdown table row. header N COL...: the header of a
# table whose first N columns are text and the rest numbers.
row() { printf '|'; printf ' %s |' "$@"; echo; }
header() {
    local n=$1 i; shift
    row "$@"
    printf '|'; for ((i = 1; i <= $#; i++)); do if ((i <= n)); then printf -- '---|'; else printf -- '--:|'; fi; done; echo
}
# Prints a Markdown section and keeps it for the final report.
emit() { tee -a "$REPORT"; }

label() {
    case "$1" in
    durakv-full) echo "durakv full" ;; durakv-none) echo "durakv none" ;;
    redis-always) echo "Redis always" ;; redis-no) echo "Redis no AOF" ;;
    ceiling) echo "stores nothing" ;;
    *) echo "$1" ;;
    esac
}

note() { echo "[$(date +%T)] $*" >&2; }

# ---------------------------------------------------------------------------
# Measures.

# The two servers most measures compare: durable writes on both.
PAIR="durakv-full redis-always"

# alternate "CFG..." FN ARGS...: RUNS samples of each configuration, taking
# turns (durakv, Redis, durakv, ...) so that a noisy neighbour hits both
# alike, each on a fresh server: FN CFG ARGS... while it runs.
alternate() {
    local cfgs=$1 fn=$2 run cfg; shift 2
    for run in $(seq "$RUNS"); do
        for cfg in $cfgs; do
            note "${fn#sample_} $cfg${*:+ $*}, run $run/$RUNS"
            start_config "$cfg"
            "$fn" "$cfg" "$@"
            stop_server
        done
    done
}

set_disk() { if [ "$1" = slowsync ]; then use_slowsync; else WRAP=(); fi; } # local|slowsync

# sample_memtier CFG KEY MEMTIER-ARGS...: one TEST_TIME run, kept under KEY/CFG.
sample_memtier() {
    local cfg=$1 key=$2 r; shift 2
    r=$(memtier --test-time="$TEST_TIME" "${MEMTIER_KEYS[@]}" "$@")
    add_all "$key/$cfg" "$r"
}

# fdatasync latency as durakv sees it: one client, so one record per fsync.
probe_fsync() {
    WRAP=()
    start_config durakv-full
    client redis-benchmark -h 127.0.0.1 -p "$SRV_PORT" -t set -c 1 -n 2000 -d 128 -q >/dev/null 2>&1
    FSYNC_US_PROBE=$(info_field wal_avg_fsync_us)
    stop_server
}

# 1. Local disk: what durability costs against Redis with and without AOF.
sample_local() { # CFG PIPELINE
    local r
    r=$(rb -t set,get -c 50 -n "$N" -d 128 -r 1000000 -P "$2")
    add_all "local/P$2/$1" "$r"
    if [ "$1" = durakv-full ]; then add fsync/local "$(info_field wal_avg_fsync_us)"; fi
}
measure_local() {
    local p
    WRAP=()
    for p in 1 16; do alternate "durakv-full redis-always durakv-none redis-no ceiling" sample_local "$p"; done
    {
        echo "### local disk: redis-benchmark -t set,get -c 50 -n $N -d 128 -r 1000000"
        echo
        header 2 test server req/s "p50 ms" "p99 ms" "÷ Redis no AOF" "÷ Redis always"
        local t cfg k vs_no vs_always
        for p in 1 16; do
            for t in SET GET; do
                for cfg in durakv-full durakv-none redis-always redis-no ceiling; do
                    k=local/P$p/$cfg/$t
                    vs_no="" vs_always=""
                    [[ $cfg = durakv-* || $cfg = ceiling ]] && vs_no=$(mratio "${k}_rps" "local/P$p/redis-no/${t}_rps")
                    [[ $cfg = durakv-full ]] && vs_always=$(mratio "${k}_rps" "local/P$p/redis-always/${t}_rps")
                    row "$t -P $p" "$(label $cfg)" "$(mnum "${k}_rps")" "$(mms "${k}_p50")" "$(mms "${k}_p99")" \
                        "$vs_no" "$vs_always"
                done
            done
        done
        echo
        echo "Targets: full ÷ Redis no AOF ≥ 1.0; none ÷ Redis no AOF ≥ 1.2; full ÷ Redis always ≥ 1.5; no p99 regression."
        echo "\"stores nothing\" is \`durakv bench ceiling\`, a server that parses each request and answers from constants:"
        echo "no server can do more with this client on this machine, so a target above its row is out of reach here."
        echo
    } | emit
}

# 2. Emulated network block storage: group commit against one fsync per
# event-loop turn when each fsync takes SLOWSYNC_US longer. durakv `none`,
# which never fsyncs, runs the same load: what durakv reaches on this
# machine (two vCPUs shared with the client) whatever its log does. So does
# a server that stores nothing: what any server reaches with this client.
measure_slowsync() {
    local mix k
    set_disk slowsync
    for mix in 1:0 1:10; do
        alternate "$PAIR durakv-none ceiling" sample_memtier "slowsync/$mix" -t 4 -c 50 -d 128 --ratio="$mix"
    done
    WRAP=()
    {
        echo "### slowsync (${SLOWSYNC_US} µs per fsync): durakv bench memtier -t 4 -c 50 -d 128, keys 1..5,000,000, ${TEST_TIME} s"
        echo
        header 2 SET:GET server ops/s "p50 ms" "p99 ms" "SET p99 ms" "GET p99 ms" "÷ Redis always"
        for mix in 1:0 1:10; do
            k=slowsync/$mix
            row "$mix" "durakv full" "$(mnum $k/durakv-full/rps)" "$(mms $k/durakv-full/p50)" \
                "$(mms $k/durakv-full/p99)" "$(mms $k/durakv-full/set_p99)" "$(mms $k/durakv-full/get_p99)" \
                "$(mratio $k/durakv-full/rps $k/redis-always/rps)"
            row "$mix" "Redis always" "$(mnum $k/redis-always/rps)" "$(mms $k/redis-always/p50)" \
                "$(mms $k/redis-always/p99)" "$(mms $k/redis-always/set_p99)" "$(mms $k/redis-always/get_p99)" ""
            row "$mix" "durakv none (no fsync)" "$(mnum $k/durakv-none/rps)" "$(mms $k/durakv-none/p50)" \
                "$(mms $k/durakv-none/p99)" "$(mms $k/durakv-none/set_p99)" "$(mms $k/durakv-none/get_p99)" \
                "$(mratio $k/durakv-none/rps $k/redis-always/rps)"
            row "$mix" "stores nothing" "$(mnum $k/ceiling/rps)" "$(mms $k/ceiling/p50)" \
                "$(mms $k/ceiling/p99)" "$(mms $k/ceiling/set_p99)" "$(mms $k/ceiling/get_p99)" \
                "$(mratio $k/ceiling/rps $k/redis-always/rps)"
        done
        echo
        echo "Targets: durakv ÷ Redis always ≥ 3 in throughput; durakv GET p99 < 1 ms in the 1:10 mix."
        echo "durakv none never fsyncs: its row is the most any durability level of durakv reaches on this machine."
        echo "\"stores nothing\" (\`durakv bench ceiling\`) answers from constants: the most any server reaches with this client here."
        echo
    } | emit
}

# 3. Several WAL directories on volumes that are each the bottleneck
# (throttled loop devices; start_config's wal-* configurations). Only the
# server runs under the caps. Each stream first zero-fills a 16 MB segment at
# its volume's cap (2 s at 8 MB/s), so a TEST_TIME under about 10 s mostly
# measures that start-up.
measure_volumes() {
    if [ "$(id -u)" != 0 ]; then
        printf '### volumes\n\nSkipped: volumes.sh needs root.\n\n' | emit; return 0
    fi
    VOLDIR=$WORK/volumes
    if ! "$VOLUMES_SH" up "$VOLDIR" 4 --mbps "$VOL_MBPS" --size-mb "$VOL_SIZE_MB" >"$WORK/volumes.log" 2>&1; then
        printf '### volumes\n\nSkipped: volumes.sh up failed:\n\n```\n%s\n```\n\n' "$(tail -5 "$WORK/volumes.log")" | emit
        "$VOLUMES_SH" down "$VOLDIR" >/dev/null 2>&1 || true; VOLDIR=""; return 0
    fi
    WRAP=("$VOLUMES_SH" run "$VOLDIR" --)
    alternate "wal-1 wal-2 wal-4 wal-2on1" sample_memtier volumes -t 4 -c 50 -d 1000 --ratio=1:0
    WRAP=()
    "$VOLUMES_SH" down "$VOLDIR" >/dev/null 2>&1 || true
    VOLDIR=""
    {
        echo "### volumes: ${VOL_MBPS} MB/s per volume, durakv full, --wal-segment-size-mb 16, memtier -t 4 -c 50 -d 1000 --ratio 1:0, ${TEST_TIME} s"
        echo
        header 1 "WAL directories" ops/s "p50 ms" "p99 ms" "÷ 1 dir"
        local cfg k name
        for cfg in wal-1 wal-2 wal-4 wal-2on1; do
            case $cfg in wal-1) name="1 volume" ;; wal-2on1) name="2 dirs on 1 volume" ;; *) name="${cfg#wal-} volumes" ;; esac
            k=volumes/$cfg
            row "$name" "$(mnum $k/rps)" "$(mms $k/p50)" "$(mms $k/p99)" "$(mratio $k/rps volumes/wal-1/rps)"
        done
        echo
        echo "Targets: 2 volumes ≥ 1.8×, 4 volumes ≥ 3.2×, 2 dirs on 1 volume ≥ 0.95×."
        echo
    } | emit
}

# 4. YCSB workload A (half reads, half single-field updates, zipfian):
# load the records, then run for TEST_TIME seconds.
sample_ycsb() { # CFG DISK
    local r
    r=$(ycsb load)
    add "ycsb/$2/$1/load_rps" "$(field rps "$r")"
    r=$(ycsb run -p operationcount=0 -p maxexecutiontime="$TEST_TIME")
    add_all "ycsb/$2/$1" "$r"
}
measure_ycsb() {
    local disk cfg k vs
    # durakv none (the ceiling) only on the local disk: it never fsyncs.
    set_disk local
    alternate "$PAIR durakv-none" sample_ycsb local
    set_disk slowsync
    alternate "$PAIR" sample_ycsb slowsync
    WRAP=()
    {
        echo "### YCSB workload A: $YCSB_RECORDS records, $YCSB_THREADS connections, run ${TEST_TIME} s"
        echo
        header 2 disk server "load rec/s" ops/s "READ p50 ms" "READ p99 ms" "UPDATE p50 ms" "UPDATE p99 ms" \
            "÷ Redis always"
        for disk in local slowsync; do
            for cfg in $PAIR durakv-none; do
                k=ycsb/$disk/$cfg
                [ -n "${SAMPLES[$k/rps]:-}" ] || continue
                vs=""
                [[ $cfg = durakv-* ]] && vs=$(mratio $k/rps ycsb/$disk/redis-always/rps)
                row "$disk" "$(label $cfg)" "$(mnum $k/load_rps)" "$(mnum $k/rps)" "$(mms $k/read_p50)" \
                    "$(mms $k/read_p99)" "$(mms $k/update_p50)" "$(mms $k/update_p99)" "$vs"
            done
        done
        echo
        echo "Targets: durakv ÷ Redis always ≥ 1.5 on the local disk, ≥ 2 under slowsync."
        echo "durakv none never fsyncs: its row is the most any durability level can reach on this machine."
        echo
    } | emit
}

# 5. Many connections: the accept path and the memory of an idle connection
# (bench/conns.py), then throughput with 16 times the connections.
sample_conns() { # CFG
    local r
    r=$(client python3 bench/conns.py 127.0.0.1 "$SRV_PORT" "$CONNS" "$SRV_PID")
    add "conns/$1/elapsed_s" "$(field elapsed_s "$r")"
    add "conns/$1/rss_per_conn_kb" "$(field rss_per_conn_kb "$r")"
    add "conns/$1/accepted" "$(field accepted "$r")"
    # The reply is text: keep each run's, to show every distinct one.
    printf '%s\n' "${r#*reply_10001=}" | sed "s/^[\"']//; s/[\"']\$//" >>"$WORK/conns-$1-reply"
}
measure_conns() {
    local c cfg
    WRAP=()
    alternate "$PAIR" sample_conns
    for c in 50 800; do
        alternate "$PAIR" sample_memtier "conns/c$c" -t 4 -c "$c" -d 128 --ratio=1:10
    done
    {
        echo "### connections: $CONNS opened one after another, each sent PING and kept open; memtier 1:10 -d 128, ${TEST_TIME} s"
        echo
        header 2 server "connection 10,001 got" "connect time s" accepted "RSS KB per connection" \
            "ops/s at 200 (4×50)" "ops/s at 3,200 (4×800)" "3,200 ÷ 200" "p99 ms at 3,200" \
            "SET / GET p99 ms at 3,200"
        for cfg in $PAIR; do
            row "$(label $cfg)" "$(sort -u "$WORK/conns-$cfg-reply" 2>/dev/null | paste -sd/ - | sed 's/|/\\|/g')" \
                "$(mms conns/$cfg/elapsed_s)" "$(mnum conns/$cfg/accepted)" "$(med conns/$cfg/rss_per_conn_kb)" \
                "$(mnum conns/c50/$cfg/rps)" "$(mnum conns/c800/$cfg/rps)" \
                "$(mratio conns/c800/$cfg/rps conns/c50/$cfg/rps)" "$(mms conns/c800/$cfg/p99)" \
                "$(mms conns/c800/$cfg/set_p99) / $(mms conns/c800/$cfg/get_p99)"
        done
        echo
        echo "durakv ÷ Redis: connect time $(mratio conns/durakv-full/elapsed_s conns/redis-always/elapsed_s)," \
            "RSS per connection $(mratio conns/durakv-full/rss_per_conn_kb conns/redis-always/rss_per_conn_kb)."
        echo "Targets: connect time ≤ Redis's; ≤ 5 KB per idle connection; 3,200 ÷ 200 ≥ 0.9."
        echo
    } | emit
}

# 6. Reads beside durable writes: does a GET wait for someone else's fsync?
# The GETs run alone first, then while 8 writers keep up a durable SET load.
sample_reads() { # CFG DISK
    local k=reads/$2/$1 alone busy c0 c1
    # Preload, so that most GETs find a 128-byte value.
    rb -t set -c 50 -P 16 -n $((2 * READ_KEYS)) -d 128 -r "$READ_KEYS" >/dev/null
    alone=$(rb -t get -c 50 -n "$N" -r "$READ_KEYS")
    # timeout itself in the background (not a function), so that killing
    # $! stops redis-benchmark too.
    timeout -k 5 "$CLIENT_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$SRV_PORT" -t set -c 8 \
        -d 128 -r 1000000 -n 1000000000 -q >/dev/null 2>&1 &
    WRITER_PID=$!
    sleep 1 # let the write load reach its steady state
    c0=$(info_field total_commands_processed)
    busy=$(rb -t get -c 50 -n "$N" -r "$READ_KEYS")
    c1=$(info_field total_commands_processed)
    kill -0 "$WRITER_PID" 2>/dev/null || { echo "the SET load stopped before the GETs ended" >&2; return 1; }
    kill -TERM "$WRITER_PID" 2>/dev/null || true
    wait "$WRITER_PID" 2>/dev/null || true
    WRITER_PID=""
    add "$k/alone_rps" "$(field GET_rps "$alone")"
    add "$k/alone_p99" "$(field GET_p99 "$alone")"
    add "$k/busy_rps" "$(field GET_rps "$busy")"
    add "$k/busy_p50" "$(field GET_p50 "$busy")"
    add "$k/busy_p99" "$(field GET_p99 "$busy")"
    # SETs served during the GET run: commands processed minus the GETs.
    add "$k/set_rps" "$(awk -v c="$((c1 - c0))" -v n="$N" -v r="$(field GET_rps "$busy")" \
        'BEGIN {if (r > 0) printf "%.0f", (c - n) * r / n}')"
}
measure_reads() {
    local disk cfg k
    for disk in local slowsync; do set_disk $disk; alternate "$PAIR" sample_reads $disk; done
    WRAP=()
    {
        echo "### reads beside durable writes: redis-benchmark -t get -c 50 -n $N -r $READ_KEYS, beside -t set -c 8 -d 128 -r 1000000"
        echo
        header 2 disk server "GET/s alone" "p99 ms alone" "GET/s with writes" "p50 ms" "p99 ms" "÷ alone" \
            "SET/s of the writers"
        for disk in local slowsync; do
            for cfg in $PAIR; do
                k=reads/$disk/$cfg
                row "$disk" "$(label $cfg)" "$(mnum $k/alone_rps)" "$(mms $k/alone_p99)" "$(mnum $k/busy_rps)" \
                    "$(mms $k/busy_p50)" "$(mms $k/busy_p99)" "$(mratio $k/busy_rps $k/alone_rps)" "$(mnum $k/set_rps)"
            done
        done
        echo
        echo "Targets (durakv full): GET/s with writes ≥ 0.9× alone, GET p99 < 1 ms, on both disks."
        echo
    } | emit
}

# ---------------------------------------------------------------------------

note "measures: ${MEASURES[*]}; RUNS=$RUNS N=$N TEST_TIME=$TEST_TIME"
FSYNC_US_PROBE=""
probe_fsync
for m in "${MEASURES[@]}"; do "measure_$m"; done

{
    echo "## bench/durable.sh ${*:-(all measures)}"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) cores ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), Linux $(uname -r), $(free -g | awk '/^Mem:/ {print $2}') GB RAM"
    echo "- durakv $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (modified)'), $(redis-server --version | awk '{print $1, $3}')"
    echo "- fdatasync, durakv INFO wal_avg_fsync_us: ${FSYNC_US_PROBE:--} µs with one client$(
        [ -n "$(med fsync/local)" ] && echo ", $(med fsync/local) µs during the local -c 50 runs")"
    echo "- RUNS=$RUNS (median shown), N=$N, TEST_TIME=$TEST_TIME s, SLOWSYNC_US=$SLOWSYNC_US; servers alternate run by run"
    echo
    cat "$REPORT"
} >"$WORK/final.md"
echo
echo "================================================================"
cat "$WORK/final.md"
if [ -n "$OUT" ]; then cp "$WORK/final.md" "$OUT"; fi
