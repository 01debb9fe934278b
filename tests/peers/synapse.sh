#!/usr/bin/env bash
# Synapse (the Matrix homeserver, from PyPI) for the Matrix tests, on a free loopback port with
# its state in <state-dir>.
#
#   tests/peers/synapse.sh start <state-dir>   # prints `export HERMES_TEST_SYNAPSE_*=...` lines
#   tests/peers/synapse.sh stop <state-dir>
#
# The configuration comes from tests/peers/synapse/*.in. Tests register their own users through
# the shared-secret admin API (/_synapse/admin/v1/register) with HERMES_TEST_SYNAPSE_SECRET, which
# is random per start. The venv is $HERMES_SYNAPSE_VENV (default ~/.cache/synapse-venv; see
# install.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${HERMES_SYNAPSE_VENV:-$HOME/.cache/synapse-venv}"

usage() { echo "usage: $0 start|stop <state-dir>" >&2; exit 64; }
[ $# -eq 2 ] || usage
command="$1"
mkdir -p "$2"
state="$(cd "$2" && pwd)"

free_port() {
    "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
random_hex() {
    "$venv/bin/python" -c 'import secrets; print(secrets.token_hex(24))'
}

start() {
    [ -x "$venv/bin/python" ] || { echo "synapse.sh: no Synapse venv at $venv; run tests/peers/install.sh" >&2; exit 1; }
    if [ -f "$state/synapse.pid" ] && kill -0 "$(cat "$state/synapse.pid")" 2>/dev/null; then
        echo "synapse.sh: a Synapse already runs from $state (pid $(cat "$state/synapse.pid"))" >&2
        exit 1
    fi
    mkdir -p "$state/data"
    local port secret
    port="$(free_port)"
    secret="$(random_hex)"
    sed -e "s|@STATE@|$state|g" -e "s|@PORT@|$port|g" -e "s|@SECRET@|$secret|g" \
        -e "s|@MACAROON@|$(random_hex)|g" -e "s|@FORM@|$(random_hex)|g" \
        "$here/synapse/homeserver.yaml.in" > "$state/homeserver.yaml"
    sed -e "s|@STATE@|$state|g" "$here/synapse/log.config.in" > "$state/log.config"
    if [ ! -f "$state/localhost.signing.key" ]; then
        "$venv/bin/python" -m synapse.app.homeserver -c "$state/homeserver.yaml" --generate-keys >"$state/generate.out" 2>&1 \
            || { echo "synapse.sh: key generation failed:" >&2; tail -n 20 "$state/generate.out" >&2; exit 1; }
    fi
    "$venv/bin/python" -m synapse.app.homeserver -c "$state/homeserver.yaml" >"$state/synapse.out" 2>&1 &
    echo $! > "$state/synapse.pid"
    local url="http://127.0.0.1:$port" waited=0
    # Schema creation takes about 4 s on first start; 60 s means something is wrong.
    until "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/_matrix/client/versions", timeout=2)' "$url" 2>/dev/null; do
        if ! kill -0 "$(cat "$state/synapse.pid")" 2>/dev/null; then
            echo "synapse.sh: Synapse exited during start-up:" >&2
            tail -n 30 "$state/synapse.out" "$state/homeserver.log" >&2 2>/dev/null || true
            exit 1
        fi
        if [ "$waited" -ge 300 ]; then
            echo "synapse.sh: Synapse did not answer on $url within 60 s:" >&2
            tail -n 30 "$state/synapse.out" "$state/homeserver.log" >&2 2>/dev/null || true
            kill "$(cat "$state/synapse.pid")" 2>/dev/null || true
            exit 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    echo "synapse.sh: Synapse up on $url (state in $state)" >&2
    echo "export HERMES_TEST_SYNAPSE_URL=$url"
    echo "export HERMES_TEST_SYNAPSE_SECRET=$secret"
}

stop() {
    [ -f "$state/synapse.pid" ] || { echo "synapse.sh: no pid file in $state; nothing to stop" >&2; return 0; }
    local pid waited=0
    pid="$(cat "$state/synapse.pid")"
    if kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge 150 ]; then
                echo "synapse.sh: Synapse (pid $pid) ignored SIGTERM for 30 s; killing it" >&2
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
    fi
    rm -f "$state/synapse.pid"
}

case "$command" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
