#!/usr/bin/env bash
# Dovecot (IMAP + LMTP) and Postfix (SMTP), both from Debian, for the email tests: each on free
# loopback ports, Postfix handing mail for example.test to Dovecot over LMTP.
#
#   tests/peers/mail.sh start <state-dir>   # prints `export HERMES_TEST_*=...` lines
#   tests/peers/mail.sh stop <state-dir>
#
# Postfix runs as its own instance (`postfix -c <folder>` with its own queue and data folders),
# so nothing under /etc/postfix is changed and two runs never share anything. Dovecot runs from
# its own configuration file too. Mail is stored as the `vmail` system user (created when
# missing; Dovecot refuses to store mail as root). Because Postfix's and Dovecot's unprivileged
# processes must reach their files, the servers' folders live in a traversable folder under /tmp
# whose path is kept in <state-dir>/shared.path and which `stop` removes.
#
# Accounts: tests append `address:{PLAIN}password` lines to $HERMES_TEST_MAIL_USERS (Dovecot
# notices the change on the next login). bot@example.test / botpw and alice@example.test /
# alicepw exist from the start. Needs root (the vmail user, Postfix's privileged start).
#
# TLS, as people really connect: at start a throwaway test CA signs a certificate for
# `localhost` and 127.0.0.1 (openssl, EC keys: a few milliseconds). Dovecot serves IMAP with
# STARTTLS on the plain IMAP port and implicit TLS on an IMAPS port; Postfix serves submission
# with STARTTLS required and SMTPS (implicit TLS), both requiring a login (Dovecot's SASL) and
# no login without TLS. The plain SMTP port stays as it was for the loopback tests. Every TLS
# port also listens on 127.0.0.2, a loopback address the certificate does not name, for the
# host-name refusals; a second, unrelated CA is made for the wrong-CA refusals.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

usage() { echo "usage: $0 start|stop <state-dir>" >&2; exit 64; }
[ $# -eq 2 ] || usage
command="$1"
mkdir -p "$2"
state="$(cd "$2" && pwd)"

# Prints $1 distinct free loopback ports on one line.
free_ports() {
    python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()' "$1"
}

# The test CA (ca.pem), a server certificate it signs for localhost and 127.0.0.1 (server.pem,
# server.key), and an unrelated CA (other-ca.pem), in folder $1. EC P-256 keys: quick to make.
make_certificates() {
    local dir="$1"
    mkdir -p "$dir"
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 -subj "/CN=hermes test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -x509 "${ec[@]}" -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem" -days 2 -subj "/CN=some other CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req "${ec[@]}" -keyout "$dir/server.key" -out "$dir/server.csr" -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > "$dir/server.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
        -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
    # Postfix reads the key and its chain from one file.
    cat "$dir/server.key" "$dir/server.pem" > "$dir/server-chain.pem"
    chmod 0600 "$dir"/*.key "$dir/server-chain.pem"
    chmod 0644 "$dir"/*.pem
    chmod 0600 "$dir/server-chain.pem"
}

# Waits until 127.0.0.1:$1 accepts connections, or fails after about 15 s showing $2's tail.
wait_port() {
    local port="$1" log="$2" name="$3" waited=0
    until python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null; do
        if [ "$waited" -ge 75 ]; then
            echo "mail.sh: $name did not listen on 127.0.0.1:$port within 15 s:" >&2
            tail -n 30 "$log" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
}

# Waits up to 10 s for file $1 (a PID file of $2) to be written.
wait_file() {
    local file="$1" name="$2" waited=0
    until [ -s "$file" ]; do
        [ "$waited" -lt 100 ] || { echo "mail.sh: $name wrote no $file" >&2; exit 1; }
        sleep 0.1
        waited=$((waited + 1))
    done
}

start() {
    command -v dovecot >/dev/null && command -v postfix >/dev/null \
        || { echo "mail.sh: dovecot and postfix are not installed; run tests/peers/install.sh" >&2; exit 1; }
    if [ -f "$state/shared.path" ]; then
        echo "mail.sh: $state already holds a running mail peer; stop it first" >&2
        exit 1
    fi
    id vmail >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin vmail
    local shared imap_port imaps_port lmtp_port smtp_port submission_port smtps_port auth_port
    shared="$(mktemp -d /tmp/hermes-mail.XXXXXX)"
    chmod 0711 "$shared"
    echo "$shared" > "$state/shared.path"
    read -r imap_port imaps_port lmtp_port smtp_port submission_port smtps_port auth_port <<<"$(free_ports 7)"
    make_certificates "$shared/tls"

    # Dovecot.
    mkdir -p "$shared/dovecot/run" "$shared/dovecot/state" "$shared/vmail"
    chown vmail:vmail "$shared/vmail"
    printf 'bot@example.test:{PLAIN}botpw\nalice@example.test:{PLAIN}alicepw\n' > "$shared/users"
    chmod 0644 "$shared/users"
    sed -e "s|@STATE@|$shared|g" -e "s|@IMAP_PORT@|$imap_port|g" -e "s|@IMAPS_PORT@|$imaps_port|g" \
        -e "s|@LMTP_PORT@|$lmtp_port|g" -e "s|@AUTH_PORT@|$auth_port|g" \
        "$here/mail/dovecot.conf.in" > "$shared/dovecot.conf"
    dovecot -c "$shared/dovecot.conf" || { echo "mail.sh: dovecot did not start:" >&2; tail -n 30 "$shared/dovecot.log" >&2 || true; exit 1; }
    # The PID first, so that `stop` can end it even if it never becomes ready.
    wait_file "$shared/dovecot/run/master.pid" "Dovecot"
    cp "$shared/dovecot/run/master.pid" "$state/dovecot.pid"
    wait_port "$imap_port" "$shared/dovecot.log" "Dovecot IMAP"
    wait_port "$imaps_port" "$shared/dovecot.log" "Dovecot IMAPS"
    wait_port "$lmtp_port" "$shared/dovecot.log" "Dovecot LMTP"
    wait_port "$auth_port" "$shared/dovecot.log" "Dovecot SASL"

    # Postfix, as an instance of its own.
    local conf="$shared/postfix"
    mkdir -p "$conf" "$shared/postfix-spool" "$shared/postfix-data"
    sed -e "s|@STATE@|$shared|g" -e "s|@LMTP_PORT@|$lmtp_port|g" -e "s|@AUTH_PORT@|$auth_port|g" \
        "$here/mail/main.cf.in" > "$conf/main.cf"
    sed -e "s|@SMTP_PORT@|$smtp_port|g" -e "s|@SUBMISSION_PORT@|$submission_port|g" -e "s|@SMTPS_PORT@|$smtps_port|g" \
        "$here/mail/master.cf.in" > "$conf/master.cf"
    touch "$shared/postfix.log"
    chown postfix "$shared/postfix-data"
    # Postfix reports start-up errors to syslog, or to a terminal; without either they are lost,
    # so its own log is read on failure (maillog_file works once postlogd is up).
    postfix -c "$conf" start >"$shared/postfix-start.out" 2>&1 \
        || { echo "mail.sh: postfix did not start (run \`script -qc 'postfix -c $conf start' /dev/null\` to see why):" >&2
             tail -n 30 "$shared/postfix-start.out" "$shared/postfix.log" >&2 || true; exit 1; }
    wait_file "$shared/postfix-spool/pid/master.pid" "Postfix"
    tr -d ' ' < "$shared/postfix-spool/pid/master.pid" > "$state/postfix.pid"
    wait_port "$smtp_port" "$shared/postfix.log" "Postfix SMTP"
    wait_port "$submission_port" "$shared/postfix.log" "Postfix submission"
    wait_port "$smtps_port" "$shared/postfix.log" "Postfix SMTPS"

    echo "export HERMES_TEST_IMAP_PORT=$imap_port"
    echo "export HERMES_TEST_SMTP_PORT=$smtp_port"
    echo "export HERMES_TEST_LMTP_PORT=$lmtp_port"
    echo "export HERMES_TEST_MAIL_HOST=127.0.0.1"
    echo "export HERMES_TEST_MAIL_DOMAIN=example.test"
    echo "export HERMES_TEST_MAIL_USERS=$shared/users"
    echo "export HERMES_TEST_DOVECOT_CONF=$shared/dovecot.conf"
    # TLS: IMAP STARTTLS is on HERMES_TEST_IMAP_PORT; the certificate names localhost and
    # 127.0.0.1 (not HERMES_TEST_MAIL_WRONG_NAME_HOST, where the same ports listen too).
    echo "export HERMES_TEST_IMAPS_PORT=$imaps_port"
    echo "export HERMES_TEST_SUBMISSION_PORT=$submission_port"
    echo "export HERMES_TEST_SMTPS_PORT=$smtps_port"
    echo "export HERMES_TEST_MAIL_CA=$shared/tls/ca.pem"
    echo "export HERMES_TEST_MAIL_OTHER_CA=$shared/tls/other-ca.pem"
    echo "export HERMES_TEST_MAIL_WRONG_NAME_HOST=127.0.0.2"
}

# Sends TERM to the PID in $1 and waits up to 10 s for it to exit.
stop_pid() {
    local pidfile="$1" pid waited=0
    [ -s "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge 100 ]; then
            echo "mail.sh: pid $pid did not exit; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$pidfile"
}

stop() {
    stop_pid "$state/postfix.pid"
    stop_pid "$state/dovecot.pid"
    if [ -f "$state/shared.path" ]; then
        local shared
        shared="$(cat "$state/shared.path")"
        # Keep the logs with the state for a post-mortem; the rest goes.
        cp "$shared/dovecot.log" "$shared/postfix.log" "$state/" 2>/dev/null || true
        case "$shared" in /tmp/hermes-mail.*) rm -rf "$shared" ;; esac
        rm -f "$state/shared.path"
    fi
}

case "$command" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
