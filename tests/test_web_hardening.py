"""The web API under hostile input, called in-process: bounded work per request, nothing read from the
server's disk because of a request, no server path in any answer, and a fuzzed request set over every
endpoint (typed and untyped junk, deep nesting, huge numbers) that must never give a 5xx."""

from __future__ import annotations

import json
import os
import random
import sys
import time

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cardfit.web import create_app  # noqa: E402
from cardfit.web.server import BudgetExceededError, WorkBudget  # noqa: E402

from .test_readers_helpers import LLAMA_31_8B  # noqa: E402


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def one_line_error(r) -> str:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    msg = r.json()["error"]
    assert isinstance(msg, str) and "\n" not in msg and "Traceback" not in msg
    return msg


# ---- bounded work ------------------------------------------------------------------------------------

DEEP = {**LLAMA_31_8B, "num_hidden_layers": 100_000}


@pytest.mark.parametrize(("path", "body"), [
    ("/api/plan", {"config_json": DEEP}),
    ("/api/speed", {"config_json": DEEP, "gpu": "RTX 4090"}),
    ("/api/read/config", DEEP),
])
def test_a_tiny_config_cannot_buy_minutes_of_work(client, path, body):
    """230 bytes with num_hidden_layers 100000 used to cost 95 s of CPU (all cards ranked)."""
    t = time.process_time()
    r = client.post(path, json=body)
    assert "layers" in one_line_error(r)
    assert time.process_time() - t < 2.0


def test_the_deepest_real_shape_still_plans_in_time(client):
    """At the cap (the deepest published transformer), every card ranked, well within the budget."""
    from cardfit.readers.model import MAX_LAYERS

    t = time.process_time()
    r = client.post("/api/plan", json={"config_json": {**LLAMA_31_8B, "num_hidden_layers": MAX_LAYERS}})
    assert r.status_code == 200, r.text[:300]
    assert time.process_time() - t < 2.0


def test_budget_stops_a_runaway_computation():
    import asyncio

    budget = WorkBudget(cpu_s=0.3, wall_s=5, workers=1)

    def forever() -> None:
        x = 0
        while True:
            x += 1

    async def both() -> tuple[float, int]:
        t = time.monotonic()
        with pytest.raises(BudgetExceededError, match="more than 0.3 s"):
            await budget.run(forever)
        took = time.monotonic() - t
        return took, await budget.run(lambda: 42)  # the worker is free again

    took, after = asyncio.run(both())
    # stopped by the CPU budget (the message says so), well before the 5 s wall-clock backstop; the margin is
    # wide because on a loaded machine 0.3 s of CPU can take several times that in wall-clock time
    assert took < 4.5 and after == 42


def test_budget_error_is_a_503(client, monkeypatch):
    from cardfit.web import app as app_mod

    tight = TestClient(create_app(budget=WorkBudget(cpu_s=0.0001, wall_s=0.0001)),
                       raise_server_exceptions=False)
    monkeypatch.setattr(app_mod.uploads, "log_summary", lambda body: time.sleep(0.5) or {})
    r = tight.post("/api/read/log", content=b"x")
    assert r.status_code == 503 and "more than" in r.json()["error"]


# ---- counts and rates bounded like the options -------------------------------------------------------

# 10,000,001: one past MAX_USERS, the limit speed's concurrency shares with deploy's --users
@pytest.mark.parametrize("items", [[None], [{}], [1e999], [10**21], [10_000_001], ["1,1e999"], [[1]]])
def test_concurrency_items(client, items):
    body = json.dumps({"model": "llama3.1:8b", "gpu": "RTX 4090", "concurrency": items})
    body = body.replace("Infinity", "1e999")
    r = client.post("/api/speed", content=body, headers={"content-type": "application/json"})
    assert "concurrency" in one_line_error(r)


def test_concurrency_items_python_api():
    import cardfit
    from cardfit.errors import InputError

    for items in ([None], [{}], [float("inf")], [10**21]):
        with pytest.raises(InputError, match="concurrency"):
            cardfit.speed("llama3.1:8b", gpu="RTX 4090", concurrency=items)


def test_huge_integers_for_float_fields_are_input_errors(client):
    """int(10**400) has no float: an OverflowError used to escape as an internal error."""
    import cardfit
    from cardfit.errors import InputError

    with pytest.raises(InputError, match="--params"):
        cardfit.plan(params=10**400, layers=32, kv_heads=8, head_dim=128)
    body = b'{"gpu": "RTX 4090", "tokens_per_s": 5, "hourly": 1' + b"0" * 400 + b"}"
    assert "--hourly" in one_line_error(client.post("/api/breakeven", content=body,
                                                    headers={"content-type": "application/json"}))


def test_validate_runtime_must_be_a_name():
    import cardfit
    from cardfit.errors import InputError

    with pytest.raises(InputError, match="runtime"):
        cardfit.validate(runtime={"a": 1})


HUGE_RATE = "eval rate:            " + "9" * 400 + " tokens/s\n"


def test_log_rate_is_bounded_like_the_option(client):
    msg = one_line_error(client.post("/api/read/log", content=HUGE_RATE.encode()))
    assert "tokens/s" in msg


def test_log_rate_is_bounded_in_the_cli(run_cli, tmp_path):
    log = tmp_path / "ollama.txt"
    log.write_text(HUGE_RATE)
    code, out, err = run_cli("breakeven", "--hourly", "1", "--from-log", str(log))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("Error: ") and "tokens/s" in err


# ---- nothing read from the server's disk, no server path shown --------------------------------------

def _ollama_store(root) -> None:
    """A pulled qwen3:8b whose blob is corrupt."""
    blob = "ab" * 32
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "qwen3" / "8b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                "digest": f"sha256:{blob}"}]}))
    (root / "blobs").mkdir()
    (root / "blobs" / f"sha256-{blob}").write_bytes(b"GGUF\x03\x00\x00\x00 corrupt")


def test_web_never_reads_the_servers_ollama_store(monkeypatch, tmp_path):
    _ollama_store(tmp_path)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    c = TestClient(create_app(), raise_server_exceptions=False)
    r = c.post("/api/plan", json={"model": "qwen3:8b", "gpu": "RTX 4090"})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["model"]["origin"] == "catalog"
    monkeypatch.delenv("OLLAMA_MODELS")
    plain = TestClient(create_app()).post("/api/plan", json={"model": "qwen3:8b", "gpu": "RTX 4090"})
    assert plain.json() == r.json()


def test_cli_still_reads_the_ollama_store(run_cli, tmp_path):
    _ollama_store(tmp_path / "store")
    code, _, err = run_cli("plan", "qwen3:8b", env={"OLLAMA_MODELS": str(tmp_path / "store")})
    assert code == 2 and "GGUF" in err  # the CLI reads what the user pulled (here: a corrupt blob)


def test_a_file_in_the_servers_folder_is_not_read(monkeypatch, tmp_path, client):
    (tmp_path / "qwen3:8b").write_text(json.dumps(LLAMA_31_8B))
    monkeypatch.chdir(tmp_path)
    r = client.post("/api/plan", json={"model": "qwen3:8b", "gpu": "RTX 4090"})
    assert r.status_code == 200 and r.json()["model"]["origin"] == "catalog"


# ---- the fuzzed request set --------------------------------------------------------------------------

JUNK = [None, True, False, 0, -1, 1.5, 1e308, -1e308, 5e-324, 10**30, -(10**30), 2**63, "", " ", "x" * 5000,
        "\x00\ud7ff",
        "../../etc/passwd", "/etc/passwd", "~/.ollama", "C:\\Windows", "%s%n", "qwen3:8b", "meta-llama/x",
        [], [None], [{}], [1e308], [10**30], {}, {"a": 1}, {"__proto__": 1}, "1,2,3", "NaN", "Infinity"]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


Route = tuple[str, str, list[str]]


def fuzz_requests(routes: list[Route], rng: random.Random) -> list[tuple[str, str, bytes]]:
    """(method, path, body) for every route: raw junk, typed junk in every known field, deep nesting, huge
    numbers written as JSON text."""
    raw = [b"", b"{", b"null", b"[]", b"\"x\"", b"{}", b"\xff\xfe", b"{\"a\":" * 5000,
           _deep(100_000).encode(),
           b"{\"model\": 1e999}", b"{\"context\": 1" + b"0" * 4000 + b"}",
           b"{\"params\": 1" + b"0" * 400 + b"}", b"{\"hourly\": -1" + b"0" * 400 + b"}",
           b"{\"model\": \"" + b"\\ud800" * 50 + b"\"}",
           json.dumps({"model": "llama3.1:8b", "x": _deep(10)}).encode()]
    out = []
    for method, path, fields in routes:
        for body in raw:
            out.append((method, path, body))
        for name in fields:
            for v in rng.sample(JUNK, 3):
                out.append((method, path, json.dumps({"model": "llama3.1:8b", name: v}).encode()))
        for _ in range(6):
            body = {name: rng.choice(JUNK) for name in rng.sample(fields, min(len(fields), 4))}
            out.append((method, path, json.dumps(body).encode()))
    return out


def _routes(app) -> list[tuple[str, str, list[str]]]:
    from cardfit.services.inputs import describe
    from cardfit.services.table import COMMANDS

    fields = {c.path: [f.name for f in describe(c.input_type())] for c in COMMANDS if c.web}
    out = []
    for route in app.routes:
        for method in sorted(getattr(route, "methods", None) or ()):
            if method in ("GET", "POST"):
                out.append((method, route.path, fields.get(route.path, ["config", "log", "kind", "runtime"])))
    assert len(out) >= 12, out
    return out


SERVER_PATHS = [p for p in {os.getcwd(), os.path.expanduser("~"), sys.prefix, os.path.dirname(__file__)}
                if len(p) > 4]


def test_fuzzed_requests_never_5xx_and_never_show_a_path(client):
    rng = random.Random(15)
    app = client.app
    requests = fuzz_requests(_routes(app), rng)
    assert len(requests) > 250
    t = time.perf_counter()
    for method, path, body in requests:
        if method == "GET":
            r = client.get(path, params={"kind": body[:64].decode("utf-8", "replace"), "runtime": "x"})
        else:
            r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code < 500, (path, body[:200], r.status_code, r.text[:300])
        for p in SERVER_PATHS:
            assert p not in r.text, (path, body[:200], r.text[:300])
        if r.status_code >= 400:
            one_line_error(r)
    assert time.perf_counter() - t < 60


def test_a_request_asked_again_gets_the_same_answer_and_headers():
    """The replay of remembered answers (by request bytes) gives what the app gives: same body, same
    security headers; a different request or an error is never served from it."""
    c = TestClient(create_app(), raise_server_exceptions=False)
    body = json.dumps({"model": "llama3.1:8b", "gpu": "RTX 4090"}).encode()
    h = {"content-type": "application/json"}
    first, again = c.post("/api/plan", content=body, headers=h), c.post("/api/plan", content=body, headers=h)
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert again.headers["content-security-policy"] == first.headers["content-security-policy"]
    other = c.post("/api/plan", content=body.replace(b"4090", b"3090"), headers=h)
    assert other.json()["gpus"][0]["gpu"] != first.json()["gpus"][0]["gpu"]
    bad = json.dumps({"model": "llama3.1:8b", "gpu": "RTX 4900"}).encode()
    assert c.post("/api/plan", content=bad, headers=h).status_code == 404
    assert c.post("/api/plan", content=bad, headers=h).status_code == 404
    assert c.get("/api/gpus").content == c.get("/api/gpus").content


def test_a_fixed_size_computation_gets_its_own_budget():
    """The validation report's work is fixed by the shipped records (about 20 s of CPU), not by the request:
    it runs under its own budget, while everything else keeps the per-request one."""
    import asyncio

    from cardfit.web.app import VALIDATION_CPU_S

    budget = WorkBudget(cpu_s=0.05, wall_s=5, workers=1)

    def spin(cpu_s: float) -> str:
        t = time.thread_time()
        while time.thread_time() - t < cpu_s:
            pass
        return "done"

    async def both() -> str:
        with pytest.raises(BudgetExceededError, match="more than 0.05 s"):
            await budget.run(spin, 0.3)
        return await budget.run(spin, 0.3, cpu_s=1.0)

    assert asyncio.run(both()) == "done"
    assert VALIDATION_CPU_S >= 5 * 20.0  # well above the ~20 s the report takes on this 2-core machine


# ---- cross-site requests (issue 25 item 10) --------------------------------------------------------------

PLAN = json.dumps({"model": "llama3.1:8b", "gpu": "RTX 4090"}).encode()


@pytest.mark.parametrize(("method", "headers", "ok"), [
    ("POST", {}, True),  # curl, scripts, the test client: no Origin
    ("POST", {"origin": "http://testserver"}, True),  # the page itself (TestClient's Host is testserver)
    ("POST", {"origin": "http://testserver:80", "sec-fetch-site": "same-origin"}, True),
    ("POST", {"origin": "http://evil.example"}, False),
    ("POST", {"origin": "http://testserver:8080"}, False),  # another port is another origin
    ("POST", {"origin": "null"}, False),  # a sandboxed frame or a file:// page
    ("POST", {"origin": "http://testserver.evil.example"}, False),
    ("POST", {"sec-fetch-site": "cross-site"}, False),  # no Origin, but the browser says where it came from
    ("GET", {"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"}, False),
    ("GET", {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}, True),  # a link to the page
    ("GET", {"sec-fetch-site": "none", "sec-fetch-mode": "navigate"}, True),  # typed in the address bar
])
def test_cross_site_requests_are_refused(client, method, headers, ok):
    if method == "POST":
        r = client.post("/api/plan", content=PLAN, headers={"content-type": "application/json", **headers})
    else:
        r = client.get("/api/gpus", headers=headers)
    if ok:
        assert r.status_code == 200, r.text[:300]
    else:
        assert r.status_code == 403 and "cross-site request refused" in one_line_error(r)


# ---- the budget's lock discipline (issue 25 item 23) -----------------------------------------------------

def test_stopping_work_at_any_point_never_deadlocks_a_worker():
    """With a tracer on (as under coverage) a DeadlineExceeded sent as a worker finished its work was raised
    inside the budget's own `with lock:` before the release was armed, and the worker hung on that lock
    for ever. Here 300 tasks of random length run where the limit falls anywhere in them (in the work, as
    they leave, as they start), under a Python tracer: every one ends, answered or refused, and the workers
    are free afterwards."""
    import asyncio
    import threading

    rng = random.Random(23)
    lengths = [rng.uniform(0.0, 0.04) for _ in range(300)]

    def tracer(frame, event, arg):  # noqa: ARG001  (a do-nothing trace function: slows every line)
        return tracer

    def work(seconds: float) -> str:
        t = time.monotonic()
        while time.monotonic() - t < seconds:
            pass
        return "done"

    threading.settrace(tracer)  # the budget's threads (made on first use) are traced
    try:
        budget = WorkBudget(cpu_s=0.02, wall_s=0.02, workers=2, heavy_workers=1, queue_s=60)

        async def one(seconds: float, heavy: bool) -> str:
            try:
                return await budget.run(work, seconds, heavy=heavy)
            except BudgetExceededError:
                return "stopped"

        async def everything() -> list[str]:
            runs = asyncio.gather(*(one(s, i % 3 == 0) for i, s in enumerate(lengths)))
            return await asyncio.wait_for(runs, 120)

        outcomes = asyncio.run(everything())
    finally:
        threading.settrace(None)
    assert set(outcomes) == {"done", "stopped"}, set(outcomes)
    assert not budget._running
    assert asyncio.run(budget.run(lambda: 42)) == 42
    budget._pool.shutdown(wait=True)


# ---- cost classes (issue 25 item 12) ---------------------------------------------------------------------

def test_expensive_requests_cannot_starve_a_cheap_one():
    """Eight expensive requests queued ahead of a cheap one used to hold it until its 10 s queue wait ran
    out (503): now they wait in their own lane, and the cheap one runs at once on its own worker."""
    import asyncio

    budget = WorkBudget(cpu_s=5, wall_s=10, workers=1, heavy_workers=1, queue_s=30)

    def spin(cpu_s: float) -> str:
        t = time.thread_time()
        while time.thread_time() - t < cpu_s:
            pass
        return "done"

    async def mixed() -> tuple[float, list[str]]:
        heavy = [asyncio.ensure_future(budget.run(spin, 0.25, heavy=True)) for _ in range(8)]
        await asyncio.sleep(0.05)  # the heavy ones hold their worker and queue
        t = time.monotonic()
        assert await budget.run(spin, 0.01) == "done"
        took = time.monotonic() - t
        return took, await asyncio.gather(*heavy)

    took, heavy = asyncio.run(mixed())
    assert heavy == ["done"] * 8
    assert took < 1.0, took  # not behind 8 × 0.25 s of CPU (at least 1.75 s still queued)


def test_deploy_and_the_validation_report_run_in_the_heavy_lane(monkeypatch):
    from cardfit.web import app as web_app

    lanes: list[tuple[str, bool]] = []

    class Recording(WorkBudget):
        async def run(self, fn, *args, cpu_s=None, heavy=False):
            lanes.append((getattr(fn, "__name__", type(fn).__name__), heavy))
            return await super().run(fn, *args, cpu_s=cpu_s, heavy=heavy)

    monkeypatch.setattr(web_app, "_validation", lambda kind, runtime: b"{}")
    c = TestClient(create_app(budget=Recording()), raise_server_exceptions=False)
    assert c.post("/api/plan", json={"model": "llama3.1:8b", "gpu": "RTX 4090"}).status_code == 200
    deploy = c.post("/api/deploy", json={"model": "llama3.1:8b", "users": 5, "gpu": ["RTX 4090"]})
    assert deploy.status_code == 200, deploy.text[:300]
    assert c.get("/api/validate", params={"kind": "kv_cache"}).status_code == 200
    assert [heavy for _, heavy in lanes] == [False, True, True], lanes


@pytest.mark.parametrize(("params", "status", "error"), [
    ({"kind": "nonsense"}, 400, "unknown record kind 'nonsense'"),
    ({"runtime": "x1"}, 400, "no record was measured on runtime 'x1'"),
    ({"kind": "decode", "runtime": "junk"}, 400, "runtime 'junk'"),
])
def test_validate_refuses_junk_filters_before_any_work(monkeypatch, params, status, error):
    """64 junk queries (each an empty report, cached) used to empty the 64-entry cache of 20 s reports: a
    filter no record has is refused before the cache or the budget, and names are cached as the records
    spell them (vLLM and vllm share an entry)."""
    from cardfit.web import app as web_app

    calls: list[tuple] = []
    monkeypatch.setattr(web_app, "_validation", lambda *key: calls.append(key) or b"{}")
    c = TestClient(create_app(), raise_server_exceptions=False)
    r = c.get("/api/validate", params=params)
    assert r.status_code == status and error in one_line_error(r)
    assert c.get("/api/validate", params={"kind": "decode", "runtime": "vLLM"}).status_code == 200
    assert calls == [("decode", "vllm")]


# ---- tiny positive numbers, and a 500 that keeps the connection (issue 25 item 11) -----------------------

def _positive_floats() -> list[tuple[type, str]]:
    from cardfit.services.inputs import describe
    from cardfit.services.table import COMMANDS

    seen = {(c.input_type(), f.name) for c in COMMANDS for f in describe(c.input_type())
            if f.kind == "float" and f.limits.gt == 0}
    return sorted(seen, key=lambda t: (t[0].__name__, t[1]))


POSITIVE_FLOATS = _positive_floats()


def test_every_positive_float_is_found():
    names = {name for _, name in POSITIVE_FLOATS}
    assert {"users", "ttft_ms", "tpot_ms", "bandwidth", "duty", "hourly"} <= names, names


@pytest.mark.parametrize(("model", "name"), POSITIVE_FLOATS,
                         ids=[f"{m.__name__}.{n}" for m, n in POSITIVE_FLOATS])
def test_a_denormal_is_not_a_positive_input(model, name):
    """5e-324 passed `> 0` and its reciprocal overflowed (deploy --users 5e-324 --json printed Infinity):
    below MIN_POSITIVE is refused with the CLI's one line; MIN_POSITIVE itself is taken."""
    from cardfit.errors import InputError
    from cardfit.services.inputs import MIN_POSITIVE, parse

    base = {"model": "llama3.1:8b"} if "model" in model.__dataclass_fields__ else {}
    for tiny in (5e-324, 1e-300, MIN_POSITIVE / 2):
        with pytest.raises(InputError, match=f"must be at least {MIN_POSITIVE:g}"):
            parse(model, {**base, name: tiny})
    assert getattr(parse(model, {**base, name: MIN_POSITIVE}), name) == MIN_POSITIVE


@pytest.mark.parametrize(("path", "body"), [
    ("/api/deploy", {"model": "llama3.1:8b", "users": 5e-324}),
    ("/api/deploy", {"model": "llama3.1:8b", "users": 4, "ttft_ms": 5e-324}),
    ("/api/speed", {"model": "llama3.1:8b", "gpu": "RTX 4090", "bandwidth": 5e-324}),
    ("/api/breakeven", {"gpu": "RTX 4090", "tokens_per_s": 100, "duty": 5e-324}),
])
def test_a_denormal_is_a_400_on_the_web(client, path, body):
    assert "must be at least" in one_line_error(client.post(path, json=body))


def test_an_unexpected_error_is_a_500_that_is_not_raised_again(monkeypatch):
    """Starlette's last-resort handler answers 500 and then re-raises, and uvicorn closes the kept-alive
    connection (and logs a traceback): the app answers it itself, so the test client, which raises what
    the app raises, sees only the 500."""
    from cardfit.web import uploads

    def broken(raw: bytes) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(uploads, "log_summary", broken)
    c = TestClient(create_app(), raise_server_exceptions=True)
    r = c.post("/api/read/log", content=b"eval rate: 5 tokens/s")
    assert r.status_code == 500
    assert r.json() == {"error": "internal error (RuntimeError); please report it with the request body"}
    assert c.get("/api/health").status_code == 200


# ---- the replay cache counts what it holds (issue 25 item 14) --------------------------------------------

def _held_bytes(obj, seen: set[int] | None = None) -> int:
    """Memory an object graph of dicts, tuples, lists, str and bytes holds, each object once."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_held_bytes(k, seen) + _held_bytes(v, seen) for k, v in obj.items())
    elif isinstance(obj, tuple | list):
        size += sum(_held_bytes(v, seen) for v in obj)
    return size


def _replay_of(app):
    from cardfit.web.app import _Replay

    node = app.middleware_stack
    while not isinstance(node, _Replay):
        node = node.app
    return node


def test_the_replay_cache_holds_no_more_than_its_cap(monkeypatch):
    """Query strings and content types were not counted, nor an entry's own objects: the cache held ~15×
    its cap. Long content types, junk query strings and distinct small bodies now fill it to its cap and
    no further (the memory its entries hold, each object counted once)."""
    from cardfit.web import app as web_app

    cap = 256 * 1024
    monkeypatch.setattr(web_app, "REPLAY_BYTES", cap)
    c = TestClient(create_app(), raise_server_exceptions=False)
    c.get("/api/health")  # builds the middleware stack
    replay = _replay_of(c.app)
    for i in range(120):
        r = c.post("/api/plan", content=json.dumps({"model": "llama3.1:8b", "gpu": "RTX 4090",
                                                    "context": 1024 + i}).encode(),
                   headers={"content-type": "application/json; charset=utf-8; x=" + "a" * 6000})
        assert r.status_code == 200, r.text[:200]
        assert c.get("/api/runtimes", params={"junk": str(i) * 500}).status_code == 200
    held = _held_bytes(replay._seen)
    assert held <= cap, (held, len(replay._seen), replay._bytes)
    assert held > cap // 2  # it is used: the cap, not the test, decides what is kept
    assert sum(1 for k in replay._seen if k[0] == "GET /api/runtimes") == 1  # one entry for every query
