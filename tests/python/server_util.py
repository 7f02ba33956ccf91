"""Helpers for the server tests and bench/load_test.py: start `tessera serve` on a free port,
wait until it is healthy, read /metrics, stop it."""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request


class ServeProcess:
    """`tessera serve MODEL --port 0 ARGS...`; the port is read from the "serving" line."""

    def __init__(self, binary, model, *args, api_key=None, start_timeout=180):
        cmd = [str(binary), "serve", str(model), "--port", "0", *map(str, args)]
        if api_key:
            cmd += ["--api-key", api_key]
        self.api_key = api_key
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        ready = threading.Event()
        self.port = None

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"tessera: serving (.+) on http://([^:]+):(\d+)", line)
                if m and not ready.is_set():
                    self.model_name, self.host, self.port = m.group(1), m.group(2), int(m.group(3))
                    ready.set()
            ready.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        if not ready.wait(start_timeout) or self.port is None:
            self.kill()
            raise RuntimeError("tessera serve did not start:\n" + "".join(self.log))
        self.base_url = f"http://{self.host}:{self.port}"
        deadline = time.time() + 30
        while self.get("/health")[0] != 200:
            if time.time() > deadline or self.proc.poll() is not None:
                self.kill()
                raise RuntimeError("tessera serve is not healthy:\n" + "".join(self.log))
            time.sleep(0.1)

    def request(self, method, path, body=None, headers=None, auth=True, timeout=60):
        """Returns (status, body bytes)."""
        h = dict(headers or {})
        if auth and self.api_key:
            h.setdefault("Authorization", f"Bearer {self.api_key}")
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.base_url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path, **kw):
        try:
            return self.request("GET", path, **kw)
        except (urllib.error.URLError, ConnectionError):
            return 0, b""

    def post_json(self, path, body, **kw):
        status, data = self.request("POST", path, body, **kw)
        return status, json.loads(data) if data else None

    def metrics(self):
        status, data = self.request("GET", "/metrics")
        assert status == 200, data
        return parse_metrics(data.decode())

    def wait_idle(self, timeout=30):
        """Waits until no request runs or waits and no KV block is held; returns the metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if m["tessera_requests_running"] == 0 and m["tessera_requests_waiting"] == 0 \
                    and m["tessera_kv_blocks_used"] == 0:
                return m
            if time.time() > deadline:
                return m
            time.sleep(0.1)

    def terminate(self, timeout=60):
        """SIGTERM; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def parse_metrics(text):
    """Prometheus text → {"name{labels}": value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def synth_model(binary, out_dir, arch="qwen3", preset="tiny"):
    subprocess.run([str(binary), "synth", "--arch", arch, "--preset", preset, "--out", str(out_dir)],
                   check=True, capture_output=True, text=True)
    return out_dir


def env_binary():
    return os.environ.get("TESSERA_BIN")
