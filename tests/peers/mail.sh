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
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

usage() { echo "usage: $0 start|stop <state-dir>" >&2; exit 64; }
[ $# -eq 2 ] || usage
command="$1"
mkdir -p "$2"
state="$(cd "$2" && pwd)"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
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
    local shared imap_port lmtp_port smtp_port
    shared="$(mktemp -d /tmp/hermes-mail.XXXXXX)"
    chmod 0711 "$shared"
    echo "$shared" > "$state/shared.path"
    imap_port="$(free_port)"
    lmtp_port="$(free_port)"
    smtp_port="$(free_port)"
    while [ "$lmtp_port" = "$imap_port" ]; do lmtp_port="$(free_port)"; done
    while [ "$smtp_port" = "$imap_port" ] || [ "$smtp_port" = "$lmtp_port" ]; do smtp_port="$(free_port)"; done

    # Dovecot.
    mkdir -p "$shared/dovecot/run" "$shared/dovecot/state" "$shared/vmail"
    chown vmail:vmail "$shared/vmail"
    printf 'bot@example.test:{PLAIN}botpw\nalice@example.test:{PLAIN}alicepw\n' > "$shared/users"
    chmod 0644 "$shared/users"
    sed -e "s|@STATE@|$shared|g" -e "s|@IMAP_PORT@|$imap_port|g" -e "s|@LMTP_PORT@|$lmtp_port|g" \
        "$here/mail/dovecot.conf.in" > "$shared/dovecot.conf"
    dovecot -c "$shared/dovecot.conf" || { echo "mail.sh: dovecot did not start:" >&2; tail -n 30 "$shared/dovecot.log" >&2 || true; exit 1; }
    # The PID first, so that `stop` can end it even if it never becomes ready.
    wait_file "$shared/dovecot/run/master.pid" "Dovecot"
    cp "$shared/dovecot/run/master.pid" "$state/dovecot.pid"
    wait_port "$imap_port" "$shared/dovecot.log" "Dovecot IMAP"
    wait_port "$lmtp_port" "$shared/dovecot.log" "Dovecot LMTP"

    # Postfix, as an instance of its own.
    local conf="$shared/postfix"
    mkdir -p "$conf" "$shared/postfix-spool" "$shared/postfix-data"
    sed -e "s|@STATE@|$shared|g" -e "s|@LMTP_PORT@|$lmtp_port|g" "$here/mail/main.cf.in" > "$conf/main.cf"
    sed -e "s|@SMTP_PORT@|$smtp_port|g" "$here/mail/master.cf.in" > "$conf/master.cf"
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

    echo "export HERMES_TEST_IMAP_PORT=$imap_port"
    echo "export HERMES_TEST_SMTP_PORT=$smtp_port"
    echo "export HERMES_TEST_LMTP_PORT=$lmtp_port"
    echo "export HERMES_TEST_MAIL_HOST=127.0.0.1"
    echo "export HERMES_TEST_MAIL_DOMAIN=example.test"
    echo "export HERMES_TEST_MAIL_USERS=$shared/users"
    echo "export HERMES_TEST_DOVECOT_CONF=$shared/dovecot.conf"
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
