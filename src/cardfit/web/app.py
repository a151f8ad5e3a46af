"""The FastAPI application: one JSON endpoint per command of the command table (services/table.py), taking
the CLI's own inputs and returning the same data as `--json`; the catalogs; uploads; and the static page at
`/`. Request models are built from the same input descriptions as the CLI options (web/schema.py).

No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations, which name classes
built inside create_app."""

import functools
import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CardfitError, InputError, UnknownNameError
from ..services.inputs import parse
from ..services.table import COMMANDS, Command, json_text, to_json
from . import catalogs, uploads
from .limits import TooLargeError, body_limit, web_input
from .schema import web_model
from .server import send_json

STATIC = Path(__file__).parent / "static"


def _error(status: int, message: str) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


def error_status(e: CardfitError) -> int:
    from .server import BudgetExceededError

    if isinstance(e, TooLargeError):
        return 413
    if isinstance(e, BudgetExceededError):
        return 503
    if isinstance(e, UnknownNameError):
        return 404
    return 400


class _HttpMiddleware:
    """ASGI middleware base: non-HTTP traffic (lifespan) passes straight through to `http`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        raise NotImplementedError


class _NoServerFiles(_HttpMiddleware):
    """Every request runs with the server's model files, folders and stores out of reach (readers/source.py
    LOCAL_MODEL_FILES): what a request names is looked up in the catalogs only."""

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        from ..readers.source import LOCAL_MODEL_FILES

        LOCAL_MODEL_FILES.set(False)  # this request's context only (and the worker threads it starts)
        await self.app(scope, receive, send)


CATALOGS = ("gpus", "models", "quants", "runtimes", "apis")
REPLAY_BYTES = 32 * 2**20  # answers kept by request bytes: at most this much memory
# What one kept answer costs beyond the bytes it holds: its OrderedDict slot, key tuple, two message dicts and
# the header list (tracemalloc on CPython 3.11: about 1.6 KB an entry)
REPLAY_ENTRY_BYTES = 2048


class _Replay(_HttpMiddleware):
    """A POST to a command (or a GET of a catalog or the page) whose exact bytes were answered before gets
    the same answer again, without parsing: answers are pure functions of the request (requests read nothing
    on the server, and the catalogs do not change while it runs). Only complete 200 answers are kept, the
    oldest dropped first, and every byte of an entry counts against REPLAY_BYTES: its key (path, content
    type, body), its answer and headers, and REPLAY_ENTRY_BYTES. A GET is keyed by its path alone: the
    page and the catalogs take no query, so junk query strings all share one entry."""

    def __init__(self, app: Any, paths: frozenset[str], gets: frozenset[str]) -> None:
        super().__init__(app)
        self.paths, self.gets = paths, gets
        self._seen: OrderedDict[tuple[str, bytes, bytes], tuple[dict, dict]] = OrderedDict()
        self._bytes = 0

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        method, path = scope["method"], scope["path"]
        if not ((method == "POST" and path in self.paths) or (method == "GET" and path in self.gets)):
            await self.app(scope, receive, send)
            return
        msg = await receive()  # BodyLimit has read the whole body into this one message
        body = msg.get("body", b"") if msg["type"] == "http.request" and not msg.get("more_body") else None
        kind = dict(scope["headers"]).get(b"content-type", b"") if method == "POST" else b""
        key = (f"{method} {path}", kind, body) if body is not None else None
        hit = self._seen.get(key) if key is not None else None
        if hit is not None:
            self._seen.move_to_end(key)
            await send(hit[0])
            await send(hit[1])
            return
        sent: list[dict] = []

        async def keep(m: dict) -> None:
            sent.append(m)
            await send(m)

        await self.app(scope, _replay([msg], receive), keep)
        if (key is not None and len(sent) == 2 and sent[0]["type"] == "http.response.start"
                and sent[0]["status"] == 200 and not sent[1].get("more_body")):
            self._keep(key, (sent[0], sent[1]))

    @staticmethod
    def _size(key: tuple[str, bytes, bytes], answer: tuple[dict, dict]) -> int:
        headers = sum(len(k) + len(v) for k, v in answer[0].get("headers", ()))
        return (REPLAY_ENTRY_BYTES + len(key[0]) + len(key[1]) + len(key[2]) + headers
                + len(answer[1].get("body", b"")))

    def _keep(self, key: tuple[str, bytes, bytes], answer: tuple[dict, dict]) -> None:
        size = self._size(key, answer)
        if size > REPLAY_BYTES // 16 or key in self._seen:  # (the same request answered twice at once)
            return
        self._seen[key] = answer
        self._bytes += size
        while self._bytes > REPLAY_BYTES:
            self._bytes -= self._size(*self._seen.popitem(last=False))


class BodyLimit(_HttpMiddleware):
    """413 for a body over the endpoint's cap, by Content-Length or by counting."""

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        limit = body_limit(scope["path"])
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await send_json(send, 413, str(TooLargeError(limit)))
            return
        chunks, seen, more = [], 0, True
        while more:  # read it all (at most `limit` bytes) before the app sees any of it
            msg = await receive()
            if msg["type"] != "http.request":
                await self.app(scope, _replay([msg]), send)
                return
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            more = msg.get("more_body", False)
            if seen > limit:
                await send_json(send, 413, str(TooLargeError(limit)))
                return
        await self.app(scope,
                       _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}],
                               receive), send)


def _replay(messages: list[dict], then: Callable | None = None) -> Callable:
    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive


CACHE_ENTRIES = 512  # answers are pure functions of the validated input and the built-in catalogs


class Answers:
    """`fn`'s answers (a command's result, or plain data) as JSON bytes (services/table.py json_text), the
    last CACHE_ENTRIES remembered per validated input: the page asks the same plan again as the user types,
    shares a link or switches back. Errors are not remembered."""

    def __init__(self, fn: Callable[[Any], Any], size: int = CACHE_ENTRIES) -> None:
        self.fn, self.size = fn, size
        self._seen: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(inp: Any) -> str:
        return f"{type(inp).__name__}:{json.dumps(inp.to_json(), sort_keys=True, default=str)}"

    def cached(self, inp: Any) -> bytes | None:
        return self.hit(self.key(inp))

    def hit(self, key: str) -> bytes | None:
        """The answer remembered under `key` (Answers.key of an input), else None."""
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return self._seen[key]
        return None

    def __call__(self, inp: Any) -> bytes:
        return self.answer(inp, self.key(inp))

    def answer(self, inp: Any, key: str) -> bytes:
        """The answer for `inp`, whose key (Answers.key: ~35 us for a plan's input, its JSON with keys sorted)
        the caller worked out once for the lookup before."""
        hit = self.hit(key)
        if hit is not None:
            return hit
        body = json_text(self.fn(inp)).encode()
        with self._lock:
            self._seen[key] = body
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        return body


# Commands whose one request may use its whole CPU budget: deploy searches card × count × split × runtime ×
# quantization (0.41-0.47 s of CPU for the whole catalog on the 2-core machine, README "Performance"); the
# others answer in milliseconds. They run in the budget's heavy lane (web/server.py WorkBudget), with the
# validation report, so a queue of them never holds up a plan, a catalog or the page.
HEAVY_COMMANDS = frozenset({"deploy"})


def _typed(command: Command, budget: Any) -> Callable[..., Any]:
    """POST endpoint for a command: its JSON body is the command's input (so OpenAPI shows the CLI's own input
    description), validated once more by `parse` for the CLI's exact rules. Remembered answers come straight
    back; the rest is computed within the request's work budget (web/server.py)."""
    from fastapi.responses import Response

    model = command.input_type()
    answer = Answers(command.execute)
    heavy = command.name in HEAVY_COMMANDS

    async def endpoint(body: Any) -> Any:
        inp = web_input(parse(model, body.model_dump(exclude_unset=True)))
        key = answer.key(inp)
        data = answer.hit(key)
        if data is None:
            data = await budget.run(answer.answer, inp, key, heavy=heavy)
        return Response(data, media_type="application/json")

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=web_model(model))])
    endpoint.__name__ = command.function
    return endpoint


def _catalog(name: str) -> Callable[[], Any]:
    """GET endpoint for a built-in catalog: the same bytes every time, built on first use."""
    from fastapi.responses import Response

    body = functools.cache(lambda: json.dumps(getattr(catalogs, name)(), ensure_ascii=False).encode())

    def endpoint() -> Any:
        return Response(body(), media_type="application/json")

    return endpoint


def create_app(allowed_hosts: frozenset[str] | None = None, budget: Any = None) -> Any:
    """The app. `allowed_hosts`: Host header names it answers (None: any, for in-process use); `budget`: the
    web.server.WorkBudget its computations run under (default: a new one with the standard limits)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException as StarletteHTTPException

    app = FastAPI(title="cardfit", version=_version(),
                  docs_url=None, redoc_url=None,  # Swagger UI needs a CDN
                  description="Does this LLM fit on that GPU? The JSON API mirrors `cardfit … --json`; "
                              "request bodies are the CLI's options (snake_case).")
    from .server import HostCheck, OriginCheck, WorkBudget

    budget = budget or WorkBudget()
    body_models = {}
    for command in COMMANDS:
        if command.web:
            app.post(command.path, summary=command.summary)(_typed(command, budget))
            body_models[command.path] = command.input_type()

    @app.exception_handler(CardfitError)
    async def cardfit_error(request: Request, exc: CardfitError) -> Any:
        return _error(error_status(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Any:
        return _error(400, _validation_message(body_models.get(request.url.path), exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Any:
        return _error(exc.status_code, str(exc.detail))

    for name in CATALOGS:
        app.get(f"/api/{name}",
                summary=f"The {name} catalog ({'tiers and named APIs' if name == 'apis' else 'built-in'})",
                name=name)(_catalog(name))
    _add_readers(app, budget)

    @app.get("/api/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    page = (STATIC / "index.html").read_bytes()

    @app.get("/", include_in_schema=False)
    def index() -> Any:
        return Response(page, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(_Headers)
    app.add_middleware(_NoServerFiles)
    app.add_middleware(_Replay, paths=frozenset(c.path for c in COMMANDS if c.web),
                       gets=frozenset({"/", *(f"/api/{name}" for name in CATALOGS)}))
    app.add_middleware(BodyLimit)
    app.add_middleware(Unexpected)
    app.add_middleware(OriginCheck)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed=allowed_hosts)  # added last: runs first
    return app


class Unexpected(_HttpMiddleware):
    """A 500 with a one-line JSON error for an exception no handler knows, answered here rather than by
    Starlette's ServerErrorMiddleware, which re-raises it after answering: uvicorn then logs a traceback
    and drops the kept-alive connection. An answer already started cannot be replaced: that one is
    re-raised."""

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        started = False

        async def tracking(msg: dict) -> None:
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            if started:
                raise
            await send_json(send, 500, f"internal error ({type(exc).__name__}); please report it with the "
                                       "request body")


class _Headers(_HttpMiddleware):
    """Security headers: the page loads nothing from elsewhere."""

    CSP = (b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
           b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        async def with_headers(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"x-content-type-options", b"nosniff"),
                                          (b"content-security-policy", self.CSP),
                                          (b"referrer-policy", b"no-referrer")]}
            await send(msg)

        await self.app(scope, receive, with_headers)


def _validation_message(model: type | None, exc: Any) -> str:
    """The CLI's one line for the same values (inputs.parse), or the first error when the body is not JSON."""
    body = exc.body
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if model is not None:
        try:
            parse(model, body)
        except InputError as e:
            return str(e)
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "input"
    return f"--{loc.replace('_', '-')} {err.get('msg', 'is invalid')}"


def _add_readers(app: Any, budget: Any) -> None:
    """Upload a config.json / paste a runtime log: the request body is parsed in memory; nothing is written,
    and no path from the request is opened."""
    from fastapi import Query, Request
    from fastapi.responses import Response

    def body_doc(media: str, what: str) -> dict[str, Any]:
        return {"requestBody": {"required": True, "description": what,
                                "content": {media: {"schema": {"type": "string"}}}}}

    @app.post("/api/read/log", summary="Output tokens/s from a pasted `vllm` / `ollama run --verbose` log",
              openapi_extra=body_doc("text/plain", "the log text (at most 1 MiB)"))
    async def read_log(request: Request) -> Any:
        return await budget.run(uploads.log_summary, await request.body())

    @app.post("/api/read/config", summary="A model's shape from an uploaded config.json",
              openapi_extra=body_doc("application/json", "the contents of a Hugging Face config.json"))
    async def read_config(request: Request) -> Any:
        return await budget.run(uploads.config_summary, await request.body())

    @app.get("/api/validate", summary="cardfit's predictions against real measurements (cardfit validate)")
    async def validate(kind: str | None = Query(None, max_length=64),
                       runtime: str | None = Query(None, max_length=32)) -> Any:
        key = _validation_key(kind, runtime)  # junk is refused here, so it never takes a cache entry
        return Response(await budget.run(_validation, *key, cpu_s=VALIDATION_CPU_S, heavy=True),
                        media_type="application/json")


# The validation report's work is set by the records shipped with the package, not by the request (its two
# filters only select rows), and it is computed once per filter (cached below): about 20 s of CPU on this
# project's 2-core test machine with 1,000+ records and the leave-one-source-out refits (each source's fold
# re-solves the fitted constants through served-load simulations), so it gets a budget of its own instead of
# the 2 s every request-sized computation gets, with room for a slower or busier machine.
VALIDATION_CPU_S = 120.0


def _validation_key(kind: str | None, runtime: str | None) -> tuple[str | None, str | None]:
    """The report's filters as a cache key: a known kind, and the runtime as its records spell it (so
    `vLLM` and `vllm` share an entry); InputError for a kind or runtime no record has."""
    from ..validation.validate import KINDS, _norm_rt, all_records  # how load_records compares runtimes

    kind, runtime = (kind or "").strip() or None, (runtime or "").strip() or None
    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown record kind '{kind[:64]}'; one of {', '.join(KINDS)}", field="kind")
    if runtime is None:
        return kind, None
    known = {_norm_rt(r["runtime"]): r["runtime"] for r in all_records()}
    found = known.get(_norm_rt(runtime))
    if found is None:
        raise InputError(f"no record was measured on runtime '{runtime[:32]}'",
                         field="runtime", hint=f"one of {', '.join(sorted(set(known.values())))}")
    return kind, found


@functools.lru_cache(maxsize=64)
def _validation(kind: str | None, runtime: str | None) -> bytes:
    """The validation report (fixed work: the records ship with the package; computed once per filter)."""
    from ..validation.validate import validate

    return json.dumps(validate(kind, runtime).to_json(), ensure_ascii=False).encode()


def preload() -> None:
    """What a new server process would otherwise load on its first requests, done once before `cardfit serve
    --workers N` forks (web/server.py run_workers): the built-in catalogs parsed, and the page's first
    question (the every-card plan of the catalog's first model, asked as a request asks it: catalog names
    only, none of the server's files) worked out, so that every worker starts with those modules and
    catalogs in memory instead of computing them cold while its first clients wait. Starts no thread; a
    question that fails here is left for the requests to report."""
    from ..catalog.models import default_models
    from ..readers.source import LOCAL_MODEL_FILES
    from ..services.table import BY_NAME

    for name in CATALOGS:
        getattr(catalogs, name)()
    plan = BY_NAME["plan"]
    first = next(iter(default_models()), None)
    token = LOCAL_MODEL_FILES.set(False)
    try:
        if first is not None:
            to_json(plan.execute(web_input(parse(plan.input_type(), {"model": first.id}))))
    except CardfitError:
        pass
    finally:
        LOCAL_MODEL_FILES.reset(token)


def _version() -> str:
    from .. import __version__

    return __version__
