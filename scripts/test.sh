#!/usr/bin/env bash
# Runs every test: unit, integration (against the real binary), crash tests,
# and the Redis-client compatibility script.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
python3 -c 'import redis' 2>/dev/null || missing+=(python3-redis)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: the compatibility script needs redis-cli, redis-benchmark and redis-py."
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing them now (apt-get install redis-tools; pip install redis)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null
        python3 -c 'import redis' 2>/dev/null || pip install -q redis
    else
        echo "test.sh: install them with: sudo apt-get install redis-tools && pip install redis" >&2
        exit 1
    fi
fi

# The metrics check parses the Prometheus endpoint with Prometheus's own
# Python client.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    echo "test.sh: installing prometheus_client (pip install prometheus_client)"
    pip install -q prometheus_client || {
        echo "test.sh: install it with: pip install prometheus_client" >&2
        exit 1
    }
fi

# Redis's own test units (run by compat.sh when ../shared/redis-tests is
# present) need tclsh; install it when we can, else compat.sh skips them.
if ! command -v tclsh >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcl >/dev/null 2>&1 || true
fi

# Integration tests start the binary, so build it first.
cargo build -p durakv
cargo test --workspace
cargo build --release -p durakv
scripts/compat.sh target/release/durakv
