"""Drive the hermes API server with the official `openai` client (run by tests/e2e/openai_python.rs).

Env: HERMES_API_BASE (e.g. http://127.0.0.1:8642/v1), HERMES_API_KEY.
"""
import os
import sys

import openai
from openai import OpenAI

base = os.environ["HERMES_API_BASE"]
key = os.environ["HERMES_API_KEY"]
client = OpenAI(base_url=base, api_key=key, max_retries=0, timeout=30)


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}")
        sys.exit(1)
    print(f"ok: {message}")


models = client.models.list()
check(any(m.id == "hermes-agent" for m in models.data), f"models.list names hermes-agent: {[m.id for m in models.data]}")

conversation = {"X-Hermes-Session-Id": "python-conv"}
reply = client.chat.completions.create(
    model="hermes-agent",
    messages=[{"role": "user", "content": "remember the word zebra"}],
    extra_headers=conversation,
)
check(reply.choices[0].message.content == "echo: remember the word zebra", f"non-streaming answer: {reply.choices[0].message.content!r}")
check(reply.choices[0].finish_reason == "stop", "finish_reason is stop")
check(reply.usage is not None and reply.usage.total_tokens > 0, "usage is reported")

stream = client.chat.completions.create(
    model="hermes-agent",
    messages=[{"role": "user", "content": "which word?"}],
    stream=True,
    stream_options={"include_usage": True},
    extra_headers=conversation,
)
text = ""
usage = None
finish = None
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            text += choice.delta.content
        if choice.finish_reason:
            finish = choice.finish_reason
check(text == "echo: which word?", f"streamed answer: {text!r}")
check(finish == "stop", "stream ends with finish_reason stop")
check(usage is not None and usage.total_tokens > 0, "include_usage delivers usage")

bad = OpenAI(base_url=base, api_key="wrong-key", max_retries=0, timeout=30)
try:
    bad.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "hi"}])
    check(False, "a wrong key is refused")
except openai.AuthenticationError as e:
    check(e.status_code == 401, "a wrong key gets AuthenticationError (401)")

print("ALL OK")
