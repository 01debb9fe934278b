#!/usr/bin/env python3
"""Smoke test of a Telegram-only build (`cargo build --no-default-features --features telegram`),
run by `.ci/run`: the gateway starts with Telegram and Discord both configured, long-polls a
minimal fake Bot API on loopback (so Telegram is up), says Discord is not in this build, and stops
cleanly on SIGTERM.

Usage: python3 scripts/smoke-telegram-only.py path/to/hermes
"""

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

polled = threading.Event()


class FakeBotApi(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        method = self.path.rsplit("/", 1)[-1].lower()
        if method == "getme":
            result = {"id": 42, "is_bot": True, "first_name": "smoke", "username": "smoke_bot"}
        elif method == "getupdates":
            polled.set()
            time.sleep(0.5)
            result = []
        else:
            result = True
        body = json.dumps({"ok": True, "result": result}).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway stopped during a long poll

    do_GET = do_POST


def main() -> int:
    binary = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeBotApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as home:
        env = {
            "HERMES_HOME": home,
            "HOME": home,
            "PATH": "/usr/bin:/bin",
            "OPENAI_API_KEY": "sk-smoke-0000000000",
            "TELEGRAM_BOT_TOKEN": "123456:smoke-token",
            "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{server.server_port}",
            "TELEGRAM_ALLOWED_USERS": "1001",
            "RUST_LOG": "info",
        }
        with open(f"{home}/config.yaml", "w") as config:
            config.write("platforms:\n  discord:\n    enabled: true\n    token: smoke-discord-token\n")
        log_path = f"{home}/gateway.log"
        with open(log_path, "w") as log:
            gateway = subprocess.Popen([binary, "gateway", "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
            started = polled.wait(30)
            time.sleep(0.5)
            gateway.send_signal(signal.SIGTERM)
            code = gateway.wait(30)
        server.shutdown()
        output = open(log_path).read()
    problems = []
    if not started:
        problems.append("the gateway never long-polled the fake Bot API")
    if "no discord adapter" not in output:
        problems.append("the log does not say that this build has no Discord adapter")
    if code != 0:
        problems.append(f"the gateway exited {code} on SIGTERM")
    if problems:
        print(output)
        print("telegram-only smoke test failed: " + "; ".join(problems), file=sys.stderr)
        return 1
    print("telegram-only gateway: polled Telegram, skipped Discord, stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
