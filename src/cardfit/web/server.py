"""How `cardfit serve` serves the app: the listening socket, the Host header check, a time limit on receiving
each request, and a CPU budget for the work behind each request.

- Socket: made with the TCP protocol number, so asyncio sets TCP_NODELAY on every accepted connection
  (asyncio's _set_nodelay checks `sock.proto == IPPROTO_TCP`; a socket from socket.create_server has proto 0,
  and Nagle's algorithm with delayed ACKs then adds ~40 ms to every kept-alive request).
- Host header: only the names the server was bound to (and IP literals, which DNS cannot rebind), so a page
  on another site cannot reach the loopback server through DNS rebinding; --allow-host adds names.
- Origin: a request another site's page sent (an Origin that is not this server, or Sec-Fetch-Site
  cross-site) is refused with 403, so a page the user visits cannot post work to the local server.
- Receiving: a request's headers and body must arrive within `request_timeout_s` of the connection opening
  (or of the previous answer); idle and trickling connections are closed.
- Answering: a client that stops reading its answer (the socket's buffers full) has `request_timeout_s` to
  read some more, then the connection is dropped with what was not sent.
- Connections: at most `max_connections()` open (512, fewer where the process may open fewer files), so
  accepting never fails with EMFILE; over it, the oldest connection waiting for a request is closed.
- Work: each computation runs in one of a few worker threads and is stopped when its thread has used
  `cpu_budget_s` of CPU (a DeadlineExceeded raised in the thread), so no request holds the server longer."""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ipaddress
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import CardfitError, InputError

REQUEST_TIMEOUT_S = 10.0  # whole request (headers and body) from a client on the same machine
KEEP_ALIVE_S = 5  # idle time before a kept-alive connection is closed (uvicorn's default)
CPU_BUDGET_S = 2.0  # CPU seconds one request's computation may use
WALL_LIMIT_S = 10.0  # and wall-clock seconds, when the CPU is shared with other requests
QUEUE_WAIT_S = 10.0  # a request waits at most this long for a worker
# open connections: a browser keeps at most 6 per host (Chromium's max sockets per group, Firefox's
# network.http.max-persistent-connections-per-server), benchmarks/load_web.py at most 64 clients
MAX_CONNECTIONS = 512
FILE_MARGIN = 64  # files the process keeps open besides connections (its modules, logs, the listening socket)
# connections asyncio accepts in one go, before any of them is seen (its accept loop takes up to the listen
# backlog per wakeup: asyncio/selector_events.py _accept_connection); also the kernel's queue of them. Two
# such bursts can be open before the first is seen: a burst's connections reach connection_made two loop
# iterations after their accept (the accept callback schedules a task; the task's first step builds the
# transport, which schedules connection_made), and the next iteration's accept callback runs after that
# task step and before connection_made, so a loop slow enough to find the queue full each time holds two
# bursts unseen (max_connections leaves room for both)
ACCEPT_BURST = 64
UNSEEN_BURSTS = 2
WORKERS = 2  # threads for request-sized work (plan, speed, catalogs' readers)
HEAVY_WORKERS = 1  # and for the expensive commands (deploy, validate), so they cannot starve the rest


class BudgetExceededError(CardfitError, TimeoutError):
    """A request's computation used up its CPU budget (503) or found every worker busy."""


class DeadlineExceeded(BaseException):  # noqa: N818  (raised inside a worker thread; not an Exception)
    """Raised asynchronously in a worker thread whose request is over budget. A BaseException, so no
    `except Exception` on the way up swallows it."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket (see the module docstring for why it is made by hand)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    try:
        addr = socket.getaddrinfo(bare, port, family, socket.SOCK_STREAM, socket.IPPROTO_TCP)[0][4]
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as e:
        raise _listen_error(host, port, e) from None
    try:
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(addr)
        sock.listen(ACCEPT_BURST)
    except OSError as e:
        sock.close()
        raise _listen_error(host, port, e) from None
    return sock


def _listen_error(host: str, port: int, e: OSError) -> InputError:
    why = os.strerror(e.errno) if isinstance(e.errno, int) and e.errno > 0 else str(e)
    return InputError(f"cannot listen on {host}:{port} ({why})", field="port",
                      hint="pass --port with a free port, or --port 0 for any")


async def send_json(send: Callable, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


# ---- Host header ------------------------------------------------------------------------------------

def allowed_hosts(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Host names (without port) a request may carry: the bound name, localhost for loopback, and `extra`."""
    names = {host.strip("[]").lower(), *(h.strip().strip("[]").lower() for h in extra if h.strip())}
    if is_loopback(host) or host in ("0.0.0.0", "::"):
        names |= {"localhost", "127.0.0.1", "::1"}
    return frozenset(names)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(value: bytes) -> str | None:
    """The name in a Host header value without its port; None when malformed."""
    try:
        text = value.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return None
    if text.startswith("["):
        end = text.find("]")
        rest = text[end + 1:]
        if end < 0 or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return text[1:end] or None
    name, _, port = text.partition(":")
    if port and not port.isdigit():
        return None
    return name or None


def _ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class HostCheck:
    """ASGI middleware: 400 for a Host header that is not one of `allowed` (nor an IP literal)."""

    def __init__(self, app: Any, allowed: frozenset[str]) -> None:
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            value = dict(scope["headers"]).get(b"host", b"")
            name = _host_name(value)
            if name is None or not (name in self.allowed or _ip_literal(name)):
                shown = value.decode("ascii", "replace")[:60]
                await send_json(send, 400, f"Host '{shown}' is not served here; start `cardfit serve` with "
                                            "--allow-host NAME to answer to that name")
                return
        await self.app(scope, receive, send)


# ---- Origin: no cross-site requests -----------------------------------------------------------------

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(value: bytes) -> tuple[str, int | None] | None:
    """(host, port) of an Origin header value; None for `null` or a malformed one."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.decode("ascii").strip())
        host, port = parts.hostname, parts.port
    except (UnicodeDecodeError, ValueError):
        return None
    if not host or parts.scheme not in _DEFAULT_PORTS:
        return None
    return host, port or _DEFAULT_PORTS[parts.scheme]


def _host_port(value: bytes) -> int | None:
    """The port in a Host header value (None when it names none: the scheme's default, 80 or 443 behind a
    proxy)."""
    text = value.decode("ascii", "replace").strip()
    tail = text.rsplit("]", 1)[-1] if text.startswith("[") else text
    _, colon, port = tail.rpartition(":")
    return int(port) if colon and port.isdigit() else None


def cross_site(headers: dict[bytes, bytes], method: str) -> str | None:
    """Why a request comes from another site's page (None when it does not): its Origin is not this server
    (the name and port of its Host header), or the browser marks it `Sec-Fetch-Site: cross-site`. A
    top-level navigation (a link to the page) is allowed; requests with neither header (curl, scripts) are."""
    site = headers.get(b"sec-fetch-site", b"").lower()
    navigate = method in ("GET", "HEAD") and headers.get(b"sec-fetch-mode", b"").lower() == b"navigate"
    if site == b"cross-site" and not navigate:
        return "Sec-Fetch-Site is cross-site"
    origin = headers.get(b"origin")
    if origin is None:
        return None
    shown = origin.decode("ascii", "replace")[:80]
    found, host = _origin(origin), headers.get(b"host", b"")
    if found is None:
        return f"Origin '{shown}' is not this server"
    name, port = found
    own_port = _host_port(host)
    if name != _host_name(host) or port not in ((own_port,) if own_port else _DEFAULT_PORTS.values()):
        return f"Origin '{shown}' is not this server"
    return None


class OriginCheck:
    """ASGI middleware: 403 for a request another site's page sent (see `cross_site`), so a page the user
    visits cannot make the server work (a simple cross-site POST needs no CORS preflight)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            why = cross_site(dict(scope["headers"]), scope["method"])
            if why is not None:
                await send_json(send, 403, f"cross-site request refused ({why}); open the page this server "
                                           "serves, or call the API without a browser")
                return
        await self.app(scope, receive, send)


# ---- receiving: a time limit per request -------------------------------------------------------------

def max_connections() -> int:
    """Open connections the server keeps: MAX_CONNECTIONS, or fewer where the process may open fewer files
    (RLIMIT_NOFILE, less FILE_MARGIN for its own files and UNSEEN_BURSTS × ACCEPT_BURST for connections
    accepted before the oldest idle ones are closed), so accepting never fails with EMFILE."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == getattr(resource, "RLIM_INFINITY", -1) or soft < 0:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - FILE_MARGIN - UNSEEN_BURSTS * ACCEPT_BURST))


def protocol_class(request_timeout_s: float, limit: int | None = None) -> type:
    """uvicorn's h11 protocol with a time limit on receiving each whole request and on delivering each
    answer, and at most `limit` open connections (default: max_connections())."""
    from collections import OrderedDict

    from uvicorn.protocols.http.h11_impl import H11Protocol

    limit = max_connections() if limit is None else limit
    opened: OrderedDict[Any, None] = OrderedDict()  # this server's connections, oldest first

    class TimedH11Protocol(H11Protocol):
        _read_timer: asyncio.TimerHandle | None = None
        _write_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            opened[self] = None
            if len(opened) > limit:
                self._make_room()
            if not self.transport.is_closing():
                self._arm()

        def _make_room(self) -> None:
            """Over the limit: close the oldest connection that is waiting for a request (idle, or sending
            one), else refuse this one."""
            for other in opened:
                if other is not self and other._idle():
                    other._close()
                    return
            self.transport.abort()

        def _idle(self) -> bool:
            cycle = self.cycle
            return not self.transport.is_closing() and (cycle is None or cycle.response_complete)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            opened.pop(self, None)
            self._disarm()
            self._cancel_write_timer()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            """The client is not reading its answer: it has `request_timeout_s` to take some of it."""
            super().pause_writing()
            self._cancel_write_timer()
            self._write_timer = self.loop.call_later(request_timeout_s, self._close)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel_write_timer()

        def timeout_keep_alive_handler(self) -> None:
            super().timeout_keep_alive_handler()
            self._close()  # close() waits to deliver what is buffered; a client that never reads gets none

        def _close(self) -> None:
            """Close now: unsent answers are dropped (a transport's close() would wait for the client to read
            them, for ever if it never does)."""
            if self.transport.get_write_buffer_size():
                self.transport.abort()
            elif not self.transport.is_closing():
                self.transport.close()

        def _cancel_write_timer(self) -> None:
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None

        def _arm(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self._read_timer = self.loop.call_later(request_timeout_s, self._read_timeout)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_timeout(self) -> None:
            self._read_timer = None
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and not cycle.more_body:
                return  # the whole request arrived: the app is answering (its work has its own budget)
            self._close()

    return TimedH11Protocol


# ---- work: a CPU budget per request ------------------------------------------------------------------

def _thread_cpu_s(ident: int) -> float | None:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError):  # not on this platform: wall time only
        return None


def _raise_in(ident: int, exc: type[BaseException]) -> None:
    """Raise `exc` in thread `ident` at its next check for one. Never cleared with NULL: that leaves the
    interpreter's pending-exception flag set (only raising one unsets it), and under a tracer (coverage)
    CPython 3.11 then spins at the next function entry for ever."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc))


class _Task:
    __slots__ = ("ident", "cpu0", "wall0", "cpu_s", "wall_s", "injected", "raised", "left")

    def __init__(self, ident: int, cpu_s: float, wall_s: float) -> None:
        self.ident, self.cpu0, self.wall0 = ident, _thread_cpu_s(ident), time.monotonic()
        self.cpu_s, self.wall_s = cpu_s, wall_s
        # DeadlineExceeded sent to the thread; raised there; the worker has left
        self.injected = self.raised = self.left = False

    def over(self, now: float) -> bool:
        cpu = _thread_cpu_s(self.ident)
        return (cpu is not None and self.cpu0 is not None and cpu - self.cpu0 > self.cpu_s) \
            or now - self.wall0 > self.wall_s


class WorkBudget:
    """Runs request computations on worker threads, each stopped when over `cpu_s` of its thread's CPU
    time (or `wall_s` of wall time); a request that waits over `queue_s` for a worker is refused.

    Two lanes: `workers` threads for request-sized work and `heavy_workers` for the expensive commands
    (deploy's search, the validation report), so a queue of expensive requests never starves a plan.

    Lock discipline: DeadlineExceeded can be raised in a worker at any bytecode once sent, even inside a
    `with lock:` before its release is armed, so a worker never holds a lock while one may be on its way.
    The worker registers under the lock before its task can be stopped; the watchdog takes a task out of
    `_running` (one atomic dict.pop) before stopping it, and a leaving worker takes its own out the same
    way: whichever pop wins decides, and a worker that lost waits, holding nothing, until the exception is
    sent and raised (`_leave`)."""

    def __init__(self, cpu_s: float = CPU_BUDGET_S, wall_s: float = WALL_LIMIT_S, workers: int = WORKERS,
                 queue_s: float = QUEUE_WAIT_S, heavy_workers: int = HEAVY_WORKERS) -> None:
        self.cpu_s, self.wall_s, self.workers, self.queue_s = cpu_s, wall_s, workers, queue_s
        self.heavy_workers = heavy_workers
        self._pool = ThreadPoolExecutor(max_workers=workers + heavy_workers,
                                        thread_name_prefix="cardfit-work")
        self._slots: dict[bool, asyncio.Semaphore] = {}
        self._lock = threading.Lock()  # _watchdog, and adding to _running (never held by a stoppable task)
        self._running: dict[_Task, bool] = {}
        self._wake = threading.Event()
        self._watchdog: threading.Thread | None = None

    async def run(self, fn: Callable[..., Any], *args: Any, cpu_s: float | None = None,
                  heavy: bool = False) -> Any:
        """`fn(*args)` on a worker thread within the budget; `cpu_s` replaces the per-request CPU budget for
        work whose size the request cannot change (the validation report: fixed records, cached); `heavy`
        puts it in the lane of the expensive commands."""
        slots = self._slots.get(heavy)
        if slots is None:
            slots = self._slots[heavy] = asyncio.Semaphore(self.heavy_workers if heavy else self.workers)
        try:
            await asyncio.wait_for(slots.acquire(), self.queue_s)
        except TimeoutError:
            raise BudgetExceededError("the server is busy with other requests",
                                      hint="try again shortly") from None
        try:
            ctx = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, self._call, ctx, fn, args, self.cpu_s if cpu_s is None else cpu_s)
        finally:
            slots.release()

    def _call(self, ctx: contextvars.Context, fn: Callable[..., Any], args: tuple, cpu_s: float) -> Any:
        # a larger CPU budget brings the wall-clock limit up with it
        task = _Task(threading.get_ident(), cpu_s, max(self.wall_s, cpu_s))
        try:
            self._enter(task)
            try:
                return ctx.run(fn, *args)
            finally:
                self._leave(task)
        except DeadlineExceeded:  # raised in fn, or outside the first _leave (then this one finishes it)
            task.raised = True
            self._leave(task)
            raise BudgetExceededError(f"this request needs more than {cpu_s:g} s of work, the most one "
                                      "request may use", hint="ask for less (one card, a smaller model or "
                                      "context), or use the CLI") from None

    def _enter(self, task: _Task) -> None:
        """Make sure a watchdog runs, and register `task` last: nothing can stop it before it is in
        `_running`, and an exception raised inside a `with` block still releases the lock."""
        with self._lock:
            self._wake.set()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="cardfit-budget", daemon=True)
                self._watchdog.start()
            self._running[task] = True

    def _leave(self, task: _Task) -> None:
        """Take `task` out of `_running`; on return no DeadlineExceeded for it is pending or can come. Holds
        no lock, and may be re-entered after a DeadlineExceeded raised inside it."""
        while not task.left:
            try:
                if self._running.pop(task, False):
                    task.left = True  # taken before the watchdog: it never sends one
                    return
                while not task.injected:  # the watchdog took it and is sending one
                    time.sleep(0.0005)
                # let it be raised here (the loop checks for one at each turn) rather than later; fn may also
                # have caught it, so wait a bounded time
                until = time.monotonic() + 0.05
                while not task.raised and time.monotonic() < until:
                    time.sleep(0.0005)
                task.left = True
            except DeadlineExceeded:
                task.raised = True

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._lock:
                busy = bool(self._running)
                if not busy and time.monotonic() - idle_since > 5.0:
                    self._watchdog = None  # the next request starts another
                    return
            if not busy:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            idle_since = time.monotonic()
            time.sleep(0.02)
            now = time.monotonic()
            for task in list(self._running):
                if task.over(now) and self._running.pop(task, False):  # taken before its worker left
                    _raise_in(task.ident, DeadlineExceeded)
                    task.injected = True


# ---- running ----------------------------------------------------------------------------------------

def settle_heap() -> None:
    """Collect what is garbage already, then move every object the server holds once started (its modules,
    the app, the catalogs and what app.preload worked out, all living as long as the process) out of the
    garbage collector's sight: gc.freeze, "move them to a permanent generation and ignore them in all the
    future collections" (https://docs.python.org/3/library/gc.html#gc.freeze). Without it each full
    collection walks them all again: ~87,000 objects once the app and the page's first plan are loaded,
    ~0.3 ms of CPU per every-card plan on the project's 2-core machine (two full collections per ~300
    plans, timed with gc.callbacks and time.thread_time), ~0.02 ms once frozen. Forked workers (--workers N)
    gain as the same page says: their collections no longer write to the pages they share with the parent
    ("ensuring that GC collections in child processes won't touch the gc_refs counter of long-lived objects
    originating in the parent process")."""
    import gc

    gc.collect()
    gc.freeze()



def run(app: Any, sock: socket.socket, request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
    """Serve `app` on `sock` until interrupted."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=KEEP_ALIVE_S,
                            server_header=False, http=protocol_class(request_timeout_s), ws="none",
                            lifespan="off", h11_max_incomplete_event_size=16 * 1024, backlog=ACCEPT_BURST)
    uvicorn.Server(config).run(sockets=[sock])


# --workers: processes, each with its own memory of answers (at most 32 MiB: app.REPLAY_BYTES) and threads
MAX_WORKERS = 64


def run_workers(make_app: Callable[[], Any], sock: socket.socket, workers: int,
                request_timeout_s: float = REQUEST_TIMEOUT_S,
                started: Callable[[], None] | None = None) -> int:
    """Serve on `sock` from `workers` processes forked from this one, each running `make_app()` as `run`
    does: the kernel hands each new connection to one of them, so as many questions are computed at once
    as there are workers (one process computes one at a time: pure Python under the GIL). Each worker keeps
    every limit of a single server on its own: its Host and Origin checks, its request timeouts, its CPU
    budget per request, its open-connection cap (max_connections: per process, as the file limit it
    guards). Forks before any thread exists in this process (the app may be built and its catalogs loaded,
    app.preload, while no request has run); `started` runs here once all are forked. Returns the exit
    status once every worker has ended: SIGTERM or SIGINT here is passed on to the workers, and a worker
    that ends by itself ends the others. POSIX only (InputError elsewhere)."""
    import signal

    if not hasattr(os, "fork"):
        raise InputError("--workers above 1 needs a system with fork (Linux, macOS)", field="workers",
                         hint="leave out --workers")
    children: list[int] = []
    stopping: list[bool] = []

    def stop_all() -> None:
        """SIGTERM to every worker, once: uvicorn shuts down gracefully on the first, at once on a second."""
        if not stopping:
            stopping.append(True)
            _signal_all(children, signal.SIGTERM)

    def stop(signum: int, frame: Any) -> None:
        stop_all()

    # set before the first fork, so that no signal in between leaves workers without their parent
    previous = signal.signal(signal.SIGTERM, stop), signal.signal(signal.SIGINT, stop)
    parent = os.getpid()
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a worker: Python's own signal handling until uvicorn sets its own
            for signum, handler in zip((signal.SIGTERM, signal.SIGINT), previous, strict=True):
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            _end_with_parent(parent)
            os._exit(_serve_worker(make_app, sock, request_timeout_s))
        children.append(pid)
    if started is not None:
        started()
    return _reap(children, stop_all)


PARENT_POLL_S = 0.5  # how often a worker checks that the server that forked it is still there


def _end_with_parent(parent: int) -> None:
    """A worker whose parent is gone (killed with SIGKILL, which passes nothing on) stops as on SIGTERM,
    instead of holding the port with nobody to stop it: a thread polls getppid(), which changes once the
    parent has died (the worker is re-parented). Polled, so Linux and macOS alike."""
    import signal
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="cardfit-parent-watch", daemon=True).start()


def _serve_worker(make_app: Callable[[], Any], sock: socket.socket, request_timeout_s: float) -> int:
    """A worker's life: serve until stopped; its exit status (the parent's exit code never runs in it)."""
    try:
        run(make_app(), sock, request_timeout_s)
    except KeyboardInterrupt:
        return 0
    except BaseException as e:  # noqa: BLE001  (one line on stderr; the parent ends the other workers)
        print(f"cardfit: a worker stopped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # already ended
            pass


def _reap(children: list[int], end_others: Callable[[], None]) -> int:
    """Wait for every worker; the first to end ends the others. The worst exit status of them."""
    left, status = set(children), 0
    while left:
        try:
            pid, raw = os.wait()
        except ChildProcessError:
            break
        if pid not in left:
            continue
        left.discard(pid)
        status = max(status, os.waitstatus_to_exitcode(raw))  # (ended by a signal: negative)
        end_others()
    return status
