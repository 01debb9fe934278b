#!/usr/bin/env bash
# Runs a command with the real test peers up: Synapse (Matrix), Dovecot + an SMTP server (email)
# faster-whisper-server (speech to text, tests/peers/stt.sh) and PostgreSQL (tests/peers/postgres.sh), each on free loopback ports with
# its state in a temporary folder, then stops them by PID, whatever the command did. The command
# sees the peers through HERMES_TEST_* variables.
#
#   tests/peers/run.sh cargo test --workspace
#
# The peers are installed first when missing (tests/peers/install.sh; Debian's packages need root).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 64; }
"$here/install.sh"

state="$(mktemp -d "${TMPDIR:-/tmp}/hermes-peers.XXXXXX")"
started=()
stop_peers() {
    local peer
    for peer in "${started[@]}"; do
        "$here/$peer.sh" stop "$state/$peer" || echo "run.sh: stopping $peer failed; its log is in $state/$peer" >&2
    done
    rm -rf "$state"
}
trap stop_peers EXIT

for peer in synapse mail stt postgres; do
    mkdir -p "$state/$peer"
    started+=("$peer")
    exports="$("$here/$peer.sh" start "$state/$peer")" || { echo "run.sh: $peer did not start" >&2; exit 1; }
    eval "$exports"
done

# The MCP servers need no daemon: each test starts its own child (stdio) or server on a free
# port, from these installs.
mcp_npm="${HERMES_MCP_NPM:-$HOME/.cache/hermes-mcp-npm}/node_modules/@modelcontextprotocol"
export HERMES_TEST_MCP_EVERYTHING="$mcp_npm/server-everything/dist/index.js"
export HERMES_TEST_MCP_FILESYSTEM="$mcp_npm/server-filesystem/dist/index.js"
export HERMES_TEST_MCP_PYTHON="${HERMES_MCP_VENV:-$HOME/.cache/hermes-mcp-venv}/bin/python"

# Most tests wait on these peers, on fakes and on timers (leases, cron minutes, outages held for
# 20 s) rather than compute: six at a time halves the conformance suite's wall time on two cores
# (1,212 s → 609 s) with every test still passing. RUST_TEST_THREADS set by the caller wins.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"

"$@"
