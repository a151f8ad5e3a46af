"""`cardfit serve` as a real server on 127.0.0.1 (a child process, a free port): kept-alive latency, idle and
slow clients, the Host header, and a short load run that fails on any 5xx while the server's memory stays
under 200 MB. Every socket here has a timeout; the server is stopped at the end of the module."""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

REQUEST_TIMEOUT_S = 1.5  # the server's --request-timeout here: short, so the slow-client cases end soon
RSS_LIMIT_MB = 200


def start_server(*args: str, home: str, nofile: int | None = None) -> tuple[subprocess.Popen, int]:
    """`cardfit serve` on a free port; `nofile`: the soft limit on its open files."""
    env = {**os.environ, "HOME": home, "XDG_CACHE_HOME": os.path.join(home, ".cache"),
           "OLLAMA_MODELS": os.path.join(home, "ollama"), "HF_HUB_CACHE": os.path.join(home, "hf")}

    def limit_files() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.Popen([sys.executable, "-m", "cardfit", "serve", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=home,
                            preexec_fn=limit_files if nofile else None)  # noqa: PLW1509  (no threads here)
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if m:
            return proc, int(m[1])
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"cardfit serve did not start: {line}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = str(tmp_path_factory.mktemp("serve-home"))
    proc, port = start_server("--request-timeout", str(REQUEST_TIMEOUT_S), "--allow-host", "cardfit.lan",
                              home=home)
    try:
        yield proc, f"http://127.0.0.1:{port}", port
    finally:
        stop(proc)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read())[1]) / 1024


PLAN = {"model": "llama3.1:8b", "gpu": "RTX 4090"}


def test_kept_alive_connection_answers_without_nagle_delay(server):
    """One connection, one cached plan after another: Nagle + delayed ACK used to add ~40 ms to each."""
    _, base, _ = server
    with httpx.Client(base_url=base, timeout=10) as c:
        assert c.post("/api/plan", json=PLAN).status_code == 200
        times = []
        for _ in range(40):
            t = time.perf_counter()
            assert c.post("/api/plan", json=PLAN).status_code == 200
            times.append(time.perf_counter() - t)
    # Nagle + delayed ACK delays every such request by ~40 ms; the lower quartile stays far below that on a
    # loaded machine too, where the median can be pushed up by other processes (the figure itself is a
    # benchmark: `make bench-web`)
    quartile = sorted(times)[len(times) // 4]
    median = statistics.median(times)
    assert quartile < 0.02, f"lower quartile {quartile * 1000:.1f} ms, median {median * 1000:.1f} ms"


def test_300_idle_connections_do_not_lock_anyone_out(server):
    _, base, port = server
    idle = []
    try:
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(s)
        t = time.perf_counter()
        r = httpx.get(base + "/api/gpus", timeout=5)
        assert r.status_code == 200
        assert time.perf_counter() - t < 2
    finally:
        for s in idle:
            s.close()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("sent", [
    b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # headers never finished
    b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"model\": ",  # a body shorter than its Content-Length
    b"",  # connected, nothing sent
], ids=["slow headers", "short body", "silent"])
def test_slow_clients_are_cut_off(server, sent):
    _, _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(sent)
        assert _closed_within(s, REQUEST_TIMEOUT_S + 3)


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1:{port}", True), ("localhost:{port}", True), ("[::1]:{port}", True), ("localhost", True),
    ("attacker.example:{port}", False), ("attacker.example", False), ("localhost.attacker.example", False),
    ("127.0.0.1:x", False), ("", False),
])
def test_host_header_names_this_server(server, host, ok):
    _, base, port = server
    r = httpx.get(base + "/api/health", headers={"Host": host.format(port=port)}, timeout=5)
    assert (r.status_code == 200) is ok, r.text
    if not ok:
        assert r.status_code == 400 and "--allow-host" in r.json()["error"]


def test_allow_host_adds_a_name(server):
    _, base, port = server
    named = httpx.get(base + "/api/health", headers={"Host": f"cardfit.lan:{port}"}, timeout=5)
    assert named.status_code == 200
    assert httpx.get(base + "/api/health", headers={"Host": "other.lan"}, timeout=5).status_code == 400


LOAD = [
    ("POST", "/api/plan", PLAN),
    ("POST", "/api/plan", {"model": "qwen2.5:14b", "context": 16384}),
    ("POST", "/api/max-context", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),
    ("POST", "/api/speed", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),
    ("POST", "/api/breakeven", {"gpu": "RTX 4090", "tokens_per_s": 90}),
    ("POST", "/api/plan", {"model": "llama3.1:8b", "gpu": "RTX 4900"}),  # a 404
    ("POST", "/api/plan", {"model": 7}),  # a 400
    ("GET", "/api/models", None),
    ("GET", "/", None),
]


def test_short_load_run_has_no_5xx_and_little_memory(server):
    proc, base, _ = server

    def worker(k: int) -> list[int]:
        codes = []
        with httpx.Client(base_url=base, timeout=30) as c:
            for i in range(20):
                method, path, body = LOAD[(k + i) % len(LOAD)]
                if body is not None and i % 3 == 0:  # every third one uncached: the arithmetic runs
                    if "model" in body and "gpu" in body:
                        body = {**body, "context": 1024 + 64 * (k * 20 + i)}
                codes.append(c.request(method, path, json=body).status_code)
        return codes

    with ThreadPoolExecutor(16) as pool:
        codes = [c for batch in pool.map(worker, range(16)) for c in batch]
    assert len(codes) == 320
    assert not [c for c in codes if c >= 500]
    assert rss_mb(proc.pid) < RSS_LIMIT_MB


def test_fuzzed_requests_over_the_wire_keep_memory_flat(server):
    """A sample of the fuzzed request set (test_web_hardening) sent to the real server: no 5xx, and the
    server's memory stays under the limit afterwards."""
    import random

    from .test_web_hardening import fuzz_requests

    proc, base, _ = server
    routes = [("POST", p, ["model", "gpu", "context", "batch", "concurrency", "config_json", "tokens_per_s"])
              for p in ("/api/plan", "/api/max-context", "/api/speed", "/api/finetune", "/api/breakeven",
                        "/api/read/config", "/api/read/log")]
    sample = random.Random(15).sample(fuzz_requests(routes, random.Random(15)), 150)
    with httpx.Client(base_url=base, timeout=30) as c:
        for method, path, body in sample:
            r = c.request(method, path, content=body, headers={"content-type": "application/json"})
            assert r.status_code < 500, (path, body[:200], r.text[:300])
    assert rss_mb(proc.pid) < RSS_LIMIT_MB


def test_a_pathological_log_does_not_hold_up_other_requests(server):
    """A 60 KB paste of newlines held every route for 51 s (quadratic patterns in readers/logs.py, in C
    under the GIL): now a 1 MiB one of each kind parses in linear time, a piece at a time, and /api/health
    answers within 100 ms while they are being read."""
    _, base, _ = server
    logs = [b"x" + b"\n" * (2**20 - 1), b"x" + b"\t" * (2**20 - 1), b"\t\n \x0b" * 2**18]
    latencies: list[float] = []
    with httpx.Client(base_url=base, timeout=10) as poll, ThreadPoolExecutor(1) as pool:
        poll.get("/api/health")  # the connection is open before the pastes start
        pasted = pool.submit(lambda: [httpx.post(base + "/api/read/log", content=body, timeout=30).status_code
                                      for body in logs for _ in range(2)])
        while not pasted.done():
            t = time.perf_counter()
            assert poll.get("/api/health").status_code == 200
            latencies.append(time.perf_counter() - t)
            time.sleep(0.01)
        assert pasted.result() == [400] * 6  # "no `eval rate` … found", a one-line error
    # 9 in 10 within 100 ms, none over 500 ms: the 2 test cores are shared, and the OS may leave the server
    # unscheduled for a while (the quadratic patterns held every route for 51 s)
    latencies.sort()
    assert len(latencies) >= 10 and latencies[len(latencies) * 9 // 10] < 0.100 and latencies[-1] < 0.5, \
        latencies[-5:]


def test_a_cross_site_post_is_refused(server):
    _, base, port = server
    plan = {"model": "llama3.1:8b", "gpu": "RTX 4090"}
    evil = httpx.post(base + "/api/plan", json=plan, headers={"Origin": "http://evil.example"}, timeout=10)
    assert evil.status_code == 403 and "cross-site" in evil.json()["error"]
    marked = httpx.post(base + "/api/read/log", content=b"x", timeout=10,
                        headers={"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"})
    assert marked.status_code == 403
    own = httpx.post(base + "/api/plan", json=plan, timeout=10,
                     headers={"Origin": f"http://127.0.0.1:{port}"})
    assert own.status_code == 200


def open_sockets(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:  # closed meanwhile
            pass
    return count


def _wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the server's sockets in /proc")
def test_clients_that_never_read_their_answers_are_dropped(server):
    """A client that asks and never reads held its connection for ever (~1,030 of them pushed a request to
    3-10 s): once its socket's buffers are full it has --request-timeout to read, then it is dropped."""
    proc, base, port = server
    assert httpx.get(base + "/api/gpus", timeout=5).status_code == 200  # its thread pool's own sockets made
    # the listening socket and the thread pool's two: the earlier tests' connections are gone
    assert _wait_for(lambda: open_sockets(proc.pid) <= 3, REQUEST_TIMEOUT_S + 5), open_sockets(proc.pid)
    before = open_sockets(proc.pid)
    asks = b"GET /api/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 30  # 30 × 183 KB of answers
    stalled = []
    try:
        for _ in range(20):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            s.sendall(asks)
            stalled.append(s)
        assert _wait_for(lambda: open_sockets(proc.pid) >= before + 20, 5)
        assert _wait_for(lambda: open_sockets(proc.pid) <= before, REQUEST_TIMEOUT_S + 5), \
            (before, open_sockets(proc.pid))
        assert httpx.get(base + "/api/health", timeout=5).status_code == 200
    finally:
        for s in stalled:
            s.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the server's sockets in /proc")
def test_connections_stay_below_the_open_file_limit(tmp_path):
    """With 256 files allowed, 300 idle connections never make accept fail with EMFILE (which asyncio
    logs on every try): the oldest idle ones are closed, and a real request is answered at once."""
    from cardfit.web.server import ACCEPT_BURST, FILE_MARGIN, UNSEEN_BURSTS

    cap = 256 - FILE_MARGIN - UNSEEN_BURSTS * ACCEPT_BURST  # web.server.max_connections() under this limit
    proc, port = start_server("--request-timeout", "30", home=str(tmp_path), nofile=256)
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        t = time.perf_counter()
        assert httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5).status_code == 200
        assert time.perf_counter() - t < 2
        # the cap, the listening socket, the thread pool's two, the one just closed
        assert open_sockets(proc.pid) <= cap + 4
        closed = sum(1 for s in idle if _closed_within(s, 0.01))
        assert closed >= 300 - cap, closed  # the oldest idle ones made room
    finally:
        for s in idle:
            s.close()
        stop(proc)
    log = proc.stderr.read()
    assert "Too many open files" not in log and "EMFILE" not in log, log[-2000:]
