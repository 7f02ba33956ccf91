#!/usr/bin/env python3
"""Starts `tessera serve MODEL` on a free local port, waits until it is healthy, sends one chat
request through the OpenAI HTTP API (standard library only), prints the exchange, and stops the
server. Used by scripts/demo.sh (the README's first command); TESSERA_SERVE_ARGS adds serve options."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    binary, model = sys.argv[1], sys.argv[2]
    question = sys.argv[3] if len(sys.argv) > 3 else "Hello! Who are you?"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extra = os.environ.get("TESSERA_SERVE_ARGS", "").split()  # e.g. "--device cuda"
    server = subprocess.Popen([binary, "serve", model, "--port", str(port), *extra])
    try:
        deadline = time.time() + 120
        while True:
            if server.poll() is not None:
                print(f"tessera serve exited with status {server.returncode}", file=sys.stderr)
                return 1
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                print("tessera serve did not become healthy within 120 s", file=sys.stderr)
                return 1
            time.sleep(0.2)
        body = {"messages": [{"role": "user", "content": question}], "max_tokens": 32, "temperature": 0.8, "seed": 1}
        req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            reply = json.load(r)
        msg = reply["choices"][0]["message"]
        print(f"user: {question}")
        print(f"assistant: {msg.get('content')!r}")
        print(f"usage: {reply['usage']}  (a random-weight model: the words are noise, the plumbing is real)")
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
