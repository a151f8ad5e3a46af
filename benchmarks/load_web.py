"""Load check for `cardfit serve` (a benchmark script, not a test).

Starts `cardfit serve` on a free loopback port in a child process (or uses --url), sends a few thousand
requests from this process with a pool of threads, and prints latency percentiles per endpoint and the
number of errors (any status other than 200, or a failed connection).

    .venv/bin/python benchmarks/load_web.py                     # 3,000 requests, 16 at a time
    .venv/bin/python benchmarks/load_web.py --requests 5000 --concurrency 32
    .venv/bin/python benchmarks/load_web.py --vary             # every request different: no cache hits
    .venv/bin/python benchmarks/load_web.py --url http://127.0.0.1:8000

The app remembers its last 512 answers, so the default mix (ten distinct requests, as a page user
produces) measures the served path; --vary gives every POST its own context and measures the arithmetic.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx

# (name, method, path, JSON body): a mix of what the page sends.
MIX: list[tuple[str, str, str, Any]] = [
    ("plan all cards", "POST", "/api/plan", {"model": "llama3.1:8b"}),
    ("plan one card", "POST", "/api/plan", {"model": "qwen2.5:14b", "gpu": "RTX 4090", "context": 16384}),
    ("plan 70B fp8 vllm", "POST", "/api/plan",
     {"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "context": 32768, "runtime": "vllm"}),
    ("plan bare shape", "POST", "/api/plan",
     {"params": 7e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "quant": "bf16", "context": 8192, "batch": 8}),
    ("max-context", "POST", "/api/max-context", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),
    ("speed", "POST", "/api/speed", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),
    ("breakeven", "POST", "/api/breakeven", {"gpu": "RTX 4090", "tokens_per_s": 90}),
    ("gpus", "GET", "/api/gpus", None),
    ("models", "GET", "/api/models", None),
    ("page", "GET", "/", None),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server(url: str | None):
    if url:
        yield url.rstrip("/")
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cardfit", "serve", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.mkdtemp())
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(base + "/api/health", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    sys.exit("cardfit serve exited before answering")
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def vary(item: tuple[str, str, str, Any], i: int) -> tuple[str, str, str, Any]:
    name, method, path, body = item
    if body is None:
        return item
    if path == "/api/breakeven":
        return name, method, path, {**body, "tokens_per_s": 50 + i * 0.01}
    if path == "/api/max-context":
        return name, method, path, {**body, "batch": 1 + i % 64}
    return name, method, path, {**body, "context": 2048 + i}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--url", help="an already running `cardfit serve` (default: start one)")
    ap.add_argument("--vary", action="store_true", help="a different context in every POST (defeats the cache)")
    args = ap.parse_args()
    with server(args.url) as base, httpx.Client(base_url=base, timeout=30,
                                                limits=httpx.Limits(max_connections=args.concurrency)) as client:
        available = set(client.get("/openapi.json").json()["paths"]) | {"/"}
        mix = [m for m in MIX if m[2] in available]
        for _, method, path, body in mix:  # warm up each endpoint once
            client.request(method, path, json=body)

        def one(item: tuple[str, str, str, Any]) -> tuple[str, float, int | str]:
            name, method, path, body = item
            t0 = time.perf_counter()
            try:
                status: int | str = client.request(method, path, json=body).status_code
            except httpx.HTTPError as e:
                status = type(e).__name__
            return name, time.perf_counter() - t0, status

        work = list(itertools.islice(itertools.cycle(mix), args.requests))
        if args.vary:
            work = [vary(item, i) for i, item in enumerate(work)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(one, work))
        wall = time.perf_counter() - t0
    report(results, wall, args, base)
    return 1 if any(s != 200 for _, _, s in results) else 0


def report(results: list[tuple[str, float, int | str]], wall: float, args: argparse.Namespace, base: str) -> None:
    errors = [(n, s) for n, _, s in results if s != 200]
    print(f"cardfit serve at {base}: {len(results):,} requests, {args.concurrency} at a time, from pid {os.getpid()}"
          f"{' (--vary: every POST different)' if args.vary else ''}")
    print(f"wall {wall:.2f} s, {len(results) / wall:,.0f} requests/s, errors: {len(errors)}")
    print(f"{'endpoint':<20}{'n':>6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    names = list(dict.fromkeys(n for n, _, _ in results))
    for name in [*names, "all"]:
        lat = [t * 1e3 for n, t, _ in results if name in ("all", n)]
        print(f"{name:<20}{len(lat):>6}{statistics.median(lat):>9.1f}{pct(lat, 90):>9.1f}{pct(lat, 99):>9.1f}"
              f"{max(lat):>9.1f}")
    for (name, status), count in sorted({e: errors.count(e) for e in errors}.items()):
        print(f"error: {name}: {status} × {count}")


if __name__ == "__main__":
    sys.exit(main())
