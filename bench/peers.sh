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
