"""Load check for `cardfit serve` (a benchmark script, not a test).

Starts `cardfit serve` on a free loopback port in a child process (or uses --url), sends a few thousand
requests from this process with a pool of threads, and prints latency percentiles per endpoint and the
number of errors (any status other than 200, or a failed connection).

    .venv/bin/python benchmarks/load_web.py                     # 3,000 requests, 16 at a time
    .venv/bin/python benchmarks/load_web.py --requests 5000 --concurrency 32
    .venv/bin/python benchmarks/load_web.py --vary             # every request different: no cache hits
    .venv/bin/python benchmarks/load_web.py --url http://127.0.0.1:8000
    .venv/bin/python benchmarks/load_web.py --sweep            # `make bench-web`: the figures in the README

--sweep measures one kept-alive connection (cached plan: goal p50 <= 2 ms), then 1, 4, 16 and 64 clients at
once, each on its own kept-alive connection (requests/s, p50, p99, errors; goal at 64: no errors and
p99 <= 150 ms), and the server's resident memory (goal < 200 MB); it exits 1 when a goal is missed.
The load comes from this process (asyncio, pre-encoded requests) on the same machine, sharing its CPUs.

The app remembers its last 512 answers, so the default mix (ten distinct requests, as a page user
produces) measures the served path; --vary gives every POST its own context and measures the arithmetic.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
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
     {"params": 7e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "quant": "bf16", "context": 8192,
      "batch": 8}),
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
def server(url: str | None, args: tuple[str, ...] = ()):
    """`cardfit serve ARGS` on a free port (or the server at `url`): yields its base URL and process id."""
    if url:
        yield url.rstrip("/"), None
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cardfit", "serve", "--port", str(port), *args],
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
        yield base, proc.pid
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
    ap.add_argument("--vary", action="store_true",
                    help="a different context in every POST (defeats the cache)")
    ap.add_argument("--sweep", action="store_true", help="kept-alive latency, 1/4/16/64 clients (see above)")
    args = ap.parse_args()
    if args.sweep:
        return sweep(args.url)
    with (
        server(args.url) as (base, _),
        httpx.Client(
            base_url=base, timeout=30, limits=httpx.Limits(max_connections=args.concurrency)
        ) as client,
    ):
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


def report(results: list[tuple[str, float, int | str]], wall: float, args: argparse.Namespace,
           base: str) -> None:
    errors = [(n, s) for n, _, s in results if s != 200]
    print(f"cardfit serve at {base}: {len(results):,} requests, {args.concurrency} at a time, from pid "
          f"{os.getpid()}{' (--vary: every POST different)' if args.vary else ''}")
    print(f"wall {wall:.2f} s, {len(results) / wall:,.0f} requests/s, errors: {len(errors)}")
    print(f"{'endpoint':<20}{'n':>6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    names = list(dict.fromkeys(n for n, _, _ in results))
    for name in [*names, "all"]:
        lat = [t * 1e3 for n, t, _ in results if name in ("all", n)]
        print(f"{name:<20}{len(lat):>6}{statistics.median(lat):>9.1f}{pct(lat, 90):>9.1f}{pct(lat, 99):>9.1f}"
              f"{max(lat):>9.1f}")
    for (name, status), count in sorted({e: errors.count(e) for e in errors}.items()):
        print(f"error: {name}: {status} × {count}")


GOAL_KEPT_ALIVE_P50_MS = 2.0
GOAL_P99_MS_AT_64 = 150.0
GOAL_RSS_MB = 200.0
LEVELS = (1, 4, 16, 64)
PER_CLIENT = 60  # requests each client sends at each level


def rss_mb(pid: int | None) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, TypeError):
        return None


def _raw(method: str, path: str, body: Any, host: str) -> bytes:
    """One pre-encoded HTTP/1.1 request (the load client does no per-request work beyond sending it)."""
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(data)}\r\n"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    return head.encode() + b"\r\n" + data


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    writer.write(request)
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _client(host: str, port: int, requests: list[bytes]) -> tuple[list[float], int]:
    reader, writer = await asyncio.open_connection(host, port)
    lat, errors = [], 0
    try:
        for req in requests:
            t = time.perf_counter()
            try:
                ok = await _exchange(reader, writer, req) == 200
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
                ok = False
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
            lat.append((time.perf_counter() - t) * 1e3)
            errors += not ok
    finally:
        writer.close()
    return lat, errors


def kept_alive(base: str, n: int = 1000) -> list[float]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    req = _raw("POST", "/api/plan", {"model": "llama3.1:8b", "gpu": "RTX 4090"}, f"{host}:{port}")
    lat, errors = asyncio.run(_client(host, int(port), [req] * (n + 1)))
    assert not errors, "the cached plan failed"
    return lat[1:]


def clients(base: str, n: int, mix: list) -> tuple[list[float], int, float]:
    """`n` clients at once (asyncio, one kept-alive connection each), PER_CLIENT requests each."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    reqs = [_raw(method, path, body, f"{host}:{port}") for _, method, path, body in mix]

    async def run() -> list[tuple[list[float], int]]:
        work = [[reqs[(k + i) % len(reqs)] for i in range(PER_CLIENT)] for k in range(n)]
        return await asyncio.gather(*(_client(host, int(port), w) for w in work))

    t0 = time.perf_counter()
    done = asyncio.run(run())
    return [x for lat, _ in done for x in lat], sum(e for _, e in done), time.perf_counter() - t0


def sweep(url: str | None) -> int:
    with server(url) as (base, pid):
        with httpx.Client(base_url=base, timeout=30) as c:
            available = set(c.get("/openapi.json").json()["paths"]) | {"/"}
            mix = [m for m in MIX if m[2] in available]
            for _, method, path, body in mix:  # warm up: the answers the page asks for are remembered
                c.request(method, path, json=body)
        one = kept_alive(base)
        print(f"cardfit serve at {base}; load from {os.cpu_count()} CPUs shared with the server")
        print(f"one kept-alive connection, cached plan: {len(one)} requests, "
              f"p50 {statistics.median(one):.2f} ms, p99 {pct(one, 99):.2f} ms, "
              f"{1e3 / statistics.fmean(one):,.0f} requests/s")
        print(f"{'clients':>8}{'requests':>10}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
        rows = {}
        for n in LEVELS:
            lat, errors, wall = clients(base, n, mix)
            rows[n] = (pct(lat, 99), errors)
            print(f"{n:>8}{len(lat):>10,}{len(lat) / wall:>9,.0f}{statistics.median(lat):>9.1f}"
                  f"{pct(lat, 99):>9.1f}{errors:>8}")
        rss = rss_mb(pid)
        if rss is not None:
            print(f"server resident memory after the runs: {rss:.0f} MB")
    missed = []
    if statistics.median(one) > GOAL_KEPT_ALIVE_P50_MS:
        missed.append(f"kept-alive p50 over {GOAL_KEPT_ALIVE_P50_MS} ms")
    if rows[64][1] or rows[64][0] > GOAL_P99_MS_AT_64:
        missed.append(f"64 clients: {rows[64][1]} errors, p99 {rows[64][0]:.0f} ms "
                      f"(goal 0, <= {GOAL_P99_MS_AT_64:.0f})")
    if rss is not None and rss >= GOAL_RSS_MB:
        missed.append(f"server memory {rss:.0f} MB (goal < {GOAL_RSS_MB:.0f})")
    for m in missed:
        print(f"goal missed: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
