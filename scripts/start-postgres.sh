#!/usr/bin/env bash
# Starts a throwaway PostgreSQL on 127.0.0.1:$1 (default 15432) with its data
# in a temp directory, for the benchmark's postgres target tests. Prints the
# URL to use as DURAKV_TEST_PG_URL, then the command that stops it, then the
# directory to remove after that. PostgreSQL refuses to run as root, so it
# runs as the `postgres` user when started by root.
set -euo pipefail
port="${1:-15432}"
bin=""
for d in /usr/lib/postgresql/*/bin /usr/local/bin /usr/bin; do
    if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then bin="$d"; break; fi
done
if [ -z "$bin" ]; then
    echo "start-postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
    exit 1
fi
dir="$(mktemp -d /tmp/durakv-pg.XXXXXX)"
run=()
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$dir"
    run=(runuser -u postgres --)
fi
"${run[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on" start >/dev/null
echo "postgresql://postgres@127.0.0.1:$port/postgres"
echo "${run[*]} $bin/pg_ctl -D $dir/data -m fast stop"
echo "$dir"
