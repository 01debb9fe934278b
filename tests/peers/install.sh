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
