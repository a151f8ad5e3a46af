"""`cardfit serve --workers N`: N processes forked on one listening socket, each a whole server with its own
limits (web/server.py run_workers). Over the wire: both workers answer, each checks the Host header, and
stopping the server stops every worker."""

from __future__ import annotations

import os

import pytest

from .test_web_server import _wait_for as wait_for
from .test_web_server import start_server, stop

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self"),
                                reason="forks workers; reads their CPU time in /proc")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc/PID/stat field 4)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return sorted(out)


def cpu_ticks(pid: int) -> int:
    """User + system CPU of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])




@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    home = str(tmp_path_factory.mktemp("workers-home"))
    proc, port = start_server("--workers", "2", home=home)
    try:
        assert wait_for(lambda: len(children(proc.pid)) == 2, 30), children(proc.pid)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def test_both_workers_answer_new_questions(workers):
    """Plans at contexts of their own (none answered from memory), each on a new connection, until both
    workers have computed some: the kernel hands connections to either process."""
    proc, base = workers
    pids = children(proc.pid)
    before = {p: cpu_ticks(p) for p in pids}
    busy: set[int] = set()
    for i in range(200):
        r = httpx.post(f"{base}/api/plan", json={"model": "llama3.1:8b", "context": 4096 + i}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["gpus"], r.text
        busy = {p for p in pids if cpu_ticks(p) - before[p] >= 2}
        if len(busy) == 2:
            break
    assert busy == set(pids), {p: cpu_ticks(p) - before[p] for p in pids}


def test_every_worker_checks_the_host_header(workers):
    _, base = workers
    for _ in range(20):  # new connections: both workers take some
        r = httpx.post(f"{base}/api/plan", json={"model": "llama3.1:8b"}, headers={"Host": "evil.example"},
                       timeout=30)
        assert r.status_code == 400 and "not served here" in r.json()["error"]


def test_stopping_the_server_stops_every_worker(tmp_path):
    proc, port = start_server("--workers", "3", home=str(tmp_path))
    try:
        assert wait_for(lambda: len(children(proc.pid)) == 3, 30)
        pids = children(proc.pid)
        assert httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30).json() == {"status": "ok"}
        proc.terminate()
        assert proc.wait(timeout=15) == 0
        assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), 10), pids
    finally:
        stop(proc)


def test_workers_stop_when_the_server_is_killed(tmp_path):
    """SIGKILL passes nothing on: each worker notices its parent is gone and stops, freeing the port."""
    import signal

    proc, port = start_server("--workers", "2", home=str(tmp_path))
    pids: list[int] = []
    try:
        assert wait_for(lambda: len(children(proc.pid)) == 2, 30)
        pids = children(proc.pid)
        assert httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30).json() == {"status": "ok"}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
        gone = lambda: not any(os.path.exists(f"/proc/{p}") and "Z" not in _state(p) for p in pids)  # noqa: E731
        assert wait_for(gone, 20), pids
    finally:
        stop(proc)
        for p in pids:  # a worker the parent's death did not stop
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_workers_is_a_positive_count(run_cli):
    code, out, err = run_cli("serve", "--workers", "0")
    assert code == 2 and not out
    assert err.startswith("Error: ") and "--workers" in err and len(err.strip().splitlines()) == 1


PRELOAD = """\
import json, sys, threading
from cardfit.catalog import loader
from cardfit.catalog.models import default_models
from cardfit.services.inputs import parse
from cardfit.services.table import BY_NAME, to_json
from cardfit.web.app import preload
threads = threading.active_count()
preload()
parsed = loader.builtin.cache_info().misses
plan = BY_NAME["plan"]
first = next(iter(default_models()))
to_json(plan.execute(parse(plan.input_type(), {"model": first.id, "context": 3000})))
print(json.dumps({"threads": [threads, threading.active_count()], "parsed": parsed,
                  "parsed_later": loader.builtin.cache_info().misses - parsed}))
"""


def test_preload_starts_no_thread_and_leaves_the_page_question_warm(tmp_path):
    """What the workers inherit (web/app.py preload): the catalogs parsed and the page's first question's
    modules loaded, with no thread started before the fork; the same question at another context parses
    no catalog again."""
    import json
    import subprocess
    import sys

    from .conftest import cli_env

    proc = subprocess.run([sys.executable, "-c", PRELOAD], capture_output=True, text=True, timeout=120,
                          env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["threads"] == [1, 1]
    assert out["parsed"] >= 5 and out["parsed_later"] == 0, out


ONE_WORKER = """\
import gc, json
from cardfit.catalog import loader
import cardfit.web.server as server

def run(app, sock, request_timeout_s=0.0):  # in place of serving: what the process holds as it would start
    print(json.dumps({"frozen": gc.get_freeze_count(), "parsed": loader.builtin.cache_info().misses}))

server.run = run
from cardfit.cli import main
main(["serve", "--port", "0"])
"""


def test_one_worker_starts_with_the_catalogs_loaded_and_its_heap_frozen(tmp_path):
    """`cardfit serve` (one worker) loads what app.preload loads before it serves, as the workers of
    --workers N do, then freezes what it holds (web/server.py settle_heap): no later collection walks the
    modules, the app and the catalogs again."""
    import json
    import subprocess
    import sys

    from .conftest import cli_env

    proc = subprocess.run([sys.executable, "-c", ONE_WORKER], capture_output=True, text=True, timeout=120,
                          env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["parsed"] >= 5 and out["frozen"] > 10_000, out
