#!/usr/bin/env bash
# A real PostgreSQL (Debian's postgresql-15) for the store's backend suite and the replica tests:
# a throwaway cluster in the state folder, trust authentication for the `hermes` user, listening
# on a free loopback port only (and a socket in the state folder), stopped by PID.
#
#   tests/peers/postgres.sh start <state-dir>   # prints `export HERMES_TEST_POSTGRES_URL=postgres://hermes@127.0.0.1:PORT/postgres`
#   tests/peers/postgres.sh stop <state-dir>
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to `nobody` and runs as it.
set -euo pipefail

usage() { echo "usage: $0 start|stop <state-dir>" >&2; exit 64; }
[ $# -eq 2 ] || usage
command="$1"
mkdir -p "$2"
state="$(cd "$2" && pwd)"
bin="${HERMES_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}"

# Runs a PostgreSQL program as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

start() {
    [ -x "$bin/postgres" ] || { echo "postgres.sh: no PostgreSQL in $bin; run tests/peers/install.sh" >&2; exit 1; }
    if [ -f "$state/data/postmaster.pid" ] && kill -0 "$(head -n 1 "$state/data/postmaster.pid")" 2>/dev/null; then
        echo "postgres.sh: a PostgreSQL already runs from $state" >&2
        exit 1
    fi
    mkdir -p "$state/data" "$state/socket"
    [ "$(id -u)" = 0 ] && chown -R nobody "$state"
    # nobody must reach the state folder through its parents.
    [ "$(id -u)" = 0 ] && chmod o+x "$(dirname "$state")"
    as_owner "$bin/initdb" -D "$state/data" -U hermes --auth=trust -E UTF8 --locale=C.UTF-8 >"$state/initdb.out" 2>&1 \
        || { echo "postgres.sh: initdb failed:" >&2; tail -n 20 "$state/initdb.out" >&2; exit 1; }
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    # fsync off: the cluster is thrown away after the run, and the tests' speed is the disk's.
    as_owner "$bin/pg_ctl" -D "$state/data" -l "$state/postgres.log" -w -t 60 \
        -o "-p $port -k $state/socket -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >&2 \
        || { echo "postgres.sh: PostgreSQL did not start:" >&2; tail -n 30 "$state/postgres.log" >&2 || true; exit 1; }
    echo "postgres.sh: PostgreSQL up on 127.0.0.1:$port (state in $state)" >&2
    echo "export HERMES_TEST_POSTGRES_URL=postgres://hermes@127.0.0.1:$port/postgres"
}

stop() {
    [ -f "$state/data/postmaster.pid" ] || { echo "postgres.sh: no running cluster in $state; nothing to stop" >&2; return 0; }
    local pid waited=0
    pid="$(head -n 1 "$state/data/postmaster.pid")"
    # SIGINT is PostgreSQL's fast shutdown: clients are disconnected, nothing waits for them.
    if kill -INT "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge 100 ]; then
                echo "postgres.sh: PostgreSQL (pid $pid) did not stop in 20 s; killing it" >&2
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
    fi
}

case "$command" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
