# Sourced by the bench scripts that run durakv and Redis 7 side by side on
# loopback: checks the tools, builds durakv if needed, and provides a
# scratch directory, a server PID cleaned up on exit, and free_port.
DURAKV=${DURAKV:-target/release/durakv}
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)"; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli not found (apt-get install redis-tools)"; exit 1; }
[ -x "$DURAKV" ] || cargo build --release -q -p durakv

TMP=$(mktemp -d)
PID=
cleanup() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_peer SERVER PORT DIR LEVEL [WRAPPER...]: starts SERVER (a durakv
# binary, or `redis` for redis-server) on loopback PORT with its files and
# log in DIR; durakv at durability LEVEL, Redis with `appendfsync always`
# for full and without AOF otherwise; under WRAPPER (env, valgrind, ...)
# if given. Sets PID and waits up to WAIT_TENTHS (default 100) tenths of a
# second for it to answer PING.
start_peer() {
    local server=$1 port=$2 dir=$3 level=$4
    shift 4
    if [ "$server" = redis ]; then
        local aof=(--appendonly no)
        [ "$level" = full ] && aof=(--appendonly yes --appendfsync always)
        "$@" redis-server --port "$port" --bind 127.0.0.1 --save '' "${aof[@]}" --dir "$dir" >"$dir/log" 2>&1 &
    else
        "$@" "$server" serve --port "$port" --dir "$dir/d" --durability "$level" \
            --wal-segment-size-mb 16 >"$dir/log" 2>&1 &
    fi
    PID=$!
    for _ in $(seq "${WAIT_TENTHS:-100}"); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        kill -0 "$PID" 2>/dev/null || { echo "$server exited:" >&2; tail -5 "$dir/log" >&2; exit 1; }
        sleep 0.1
    done
}
