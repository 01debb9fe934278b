#!/usr/bin/env python3
"""A person's mail program for the gateway-level email tests, on Python's standard library:

  mailtool.py add-user USERS_FILE IMAP_PORT ADDRESS PASSWORD
      append an account to Dovecot's passwd-file and wait until it can log in
  mailtool.py send SMTP_PORT FROM TO SUBJECT MESSAGE_ID BODY [HEADER: VALUE]...
      send one plain-text mail with smtplib (extra header lines such as Authentication-Results,
      In-Reply-To or Auto-Submitted are added as given, above the others)
  mailtool.py fetch IMAP_PORT ADDRESS PASSWORD
      print the mailbox as JSON: [{"uid", "seen", "raw"}...]

Everything talks to 127.0.0.1 without TLS (the test peer of tests/peers/mail.sh).
"""
import fcntl
import imaplib
import json
import os
import smtplib
import sys
import time
from email.message import EmailMessage
from email.utils import formatdate


def add_user(users, imap_port, address, password):
    # Dovecot notices a change of the passwd-file by its modification time in whole seconds and
    # looks at most once a second: append under a lock, move the time forward, then wait until
    # the account logs in.
    with open(users, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        before = os.fstat(f.fileno()).st_mtime
        f.write(f"{address}:{{PLAIN}}{password}\n")
        f.flush()
        bumped = max(before + 1, time.time())
        os.utime(users, (bumped, bumped))
        fcntl.flock(f, fcntl.LOCK_UN)
    deadline = time.time() + 10
    while True:
        try:
            with imaplib.IMAP4("127.0.0.1", int(imap_port)) as imap:
                imap.login(address, password)
                imap.logout()
                return
        except imaplib.IMAP4.error:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def send(smtp_port, sender, to, subject, message_id, body, *headers):
    msg = EmailMessage()
    for line in headers:
        name, _, value = line.partition(":")
        msg[name.strip()] = value.strip()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = message_id
    msg["Date"] = formatdate()
    msg.set_content(body)
    with smtplib.SMTP("127.0.0.1", int(smtp_port)) as smtp:
        smtp.send_message(msg, from_addr=sender, to_addrs=[to])


def fetch(imap_port, address, password):
    out = []
    with imaplib.IMAP4("127.0.0.1", int(imap_port)) as imap:
        imap.login(address, password)
        imap.select("INBOX")
        status, data = imap.uid("FETCH", "1:*", "(UID FLAGS BODY.PEEK[])")
        for item in data:
            if not isinstance(item, tuple):
                continue
            meta = item[0].decode()
            uid = int(meta.split("UID ")[1].split()[0])
            out.append({"uid": uid, "seen": "\\Seen" in meta, "raw": item[1].decode("utf-8", "replace")})
        imap.logout()
    out.sort(key=lambda m: m["uid"])
    print(json.dumps(out))


if __name__ == "__main__":
    commands = {"add-user": add_user, "send": send, "fetch": fetch}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
