#!/usr/bin/env python3
"""Load test for `tessera serve`: N concurrent streaming clients (the official openai client)
for a fixed time, alternating chat and completions requests. Prints requests/s, TTFT and
inter-token latency percentiles (measured by the client), aggregate output tokens/s and
failures, then checks /metrics for leaks (requests still running or waiting, KV blocks held).

Either starts the server itself:
    bench/load_test.py --tessera build/tessera --model MODEL.gguf [--serve-arg=--max-num-seqs=64 ...]
or targets a running one:
    bench/load_test.py --base-url http://127.0.0.1:8000 [--api-key KEY]
Exit status: 0 when no request failed and nothing leaked, 1 otherwise."""
import argparse
import os
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import openai  # noqa: E402
from server_util import ServeProcess, parse_metrics  # noqa: E402


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def fetch_metrics(base_url, api_key):
    req = urllib.request.Request(base_url + "/metrics")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return parse_metrics(r.read().decode())


def one_request(client, model, i, max_tokens):
    """One streaming request; returns (ttft, [inter-token gaps], completion tokens)."""
    t0 = time.perf_counter()
    if i % 2:
        stream = client.chat.completions.create(
            model=model, max_tokens=max_tokens, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": f"Request {i}: tell me a story about the sea."}])
    else:
        stream = client.completions.create(model=model, prompt=f"Request {i}: once upon a time", max_tokens=max_tokens,
                                           stream=True, stream_options={"include_usage": True})
    ttft, last, gaps, tokens = None, None, [], 0
    for chunk in stream:
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        piece = c.delta.content if hasattr(c, "delta") else c.text
        if piece:
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
    if ttft is None:
        ttft = time.perf_counter() - t0
    return ttft, gaps, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="a running server, e.g. http://127.0.0.1:8000")
    ap.add_argument("--tessera", help="the tessera binary (starts a server)")
    ap.add_argument("--model", help="model path (with --tessera) or name (default: the served one)")
    ap.add_argument("--port", type=int, default=0, help="port for the started server (default: a free one)")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra `tessera serve` argument (repeatable)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    if bool(args.base_url) == bool(args.tessera):
        ap.error("give either --base-url or --tessera BIN --model PATH")

    proc = None
    if args.tessera:
        if not args.model:
            ap.error("--tessera needs --model PATH")
        serve_args = list(args.serve_arg) + (["--port", args.port] if args.port else [])
        proc = ServeProcess(args.tessera, args.model, *serve_args, api_key=args.api_key)
        base_url = proc.base_url
    else:
        base_url = args.base_url.rstrip("/")
    try:
        client = openai.OpenAI(base_url=base_url + "/v1", api_key=args.api_key or "none", max_retries=0, timeout=600)
        model = client.models.list().data[0].id if (proc or not args.model) else args.model
        lock = threading.Lock()
        ttfts, gaps, failures, errors = [], [], [0], []
        tokens, done = [0], [0]
        stop_at = time.time() + args.duration

        def worker(w):
            i = w
            while time.time() < stop_at:
                try:
                    t, g, n = one_request(client, model, i, args.max_tokens)
                    with lock:
                        ttfts.append(t)
                        gaps.extend(g)
                        tokens[0] += n
                        done[0] += 1
                except Exception as e:  # noqa: BLE001 — every failure is counted and shown
                    with lock:
                        failures[0] += 1
                        if len(errors) < 5:
                            errors.append(repr(e) + " <- " + repr(e.__cause__ or e.__context__))
                i += args.concurrency

        t0 = time.time()
        with ThreadPoolExecutor(args.concurrency) as ex:
            list(ex.map(worker, range(args.concurrency)))
        elapsed = time.time() - t0

        # Leak check: once idle, nothing runs or waits and no KV block is held.
        deadline = time.time() + 30
        while True:
            m = fetch_metrics(base_url, args.api_key)
            leaked = m.get("tessera_requests_running", 0) + m.get("tessera_requests_waiting", 0) \
                + m.get("tessera_kv_blocks_used", 0)
            if leaked == 0 or time.time() > deadline:
                break
            time.sleep(0.2)

        print(f"concurrency {args.concurrency}, {elapsed:.1f} s, max_tokens {args.max_tokens}")
        print(f"requests:      {done[0]} ok, {failures[0]} failed, {done[0] / elapsed:.2f} req/s")
        print(f"TTFT:          p50 {percentile(ttfts, 50) * 1e3:.1f} ms, p99 {percentile(ttfts, 99) * 1e3:.1f} ms")
        print(f"ITL:           p50 {percentile(gaps, 50) * 1e3:.1f} ms, p99 {percentile(gaps, 99) * 1e3:.1f} ms")
        print(f"output:        {tokens[0]} tokens, {tokens[0] / elapsed:.1f} tok/s aggregate")
        print(f"after:         running {m.get('tessera_requests_running')}, waiting "
              f"{m.get('tessera_requests_waiting')}, KV blocks used {m.get('tessera_kv_blocks_used')} "
              f"of {m.get('tessera_kv_blocks_total')}")
        for e in errors:
            print("failure:", e)
        ok = failures[0] == 0 and leaked == 0 and done[0] > 0
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if proc:
            code = proc.terminate()
            if code != 0:
                print(f"tessera serve exited with {code}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
