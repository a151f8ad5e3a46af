"""`cardfit serve`: the local web page and JSON API (cardfit.web; how it is served: cardfit.web.server)."""

from __future__ import annotations

import click

from ..web.server import MAX_WORKERS, REQUEST_TIMEOUT_S, is_loopback, listen
from . import cli

__all__ = ["is_loopback", "listen", "serve"]

SERVE_EPILOG = """\b
Examples:
  cardfit serve                      # http://127.0.0.1:8000/
  cardfit serve --port 8765 --open   # and open the page in a browser
  cardfit serve --host 0.0.0.0 --allow-host gpu-box.lan   # reachable as http://gpu-box.lan:8000/
  cardfit serve --workers 4          # four questions computed at once (a machine with 4+ cores)
  curl -s localhost:8000/api/plan -H 'content-type: application/json' \
-d '{"model": "llama3.1:8b", "gpu": "RTX 4090"}'
"""


@cli.command(epilog=SERVE_EPILOG)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but loopback exposes the app to your network")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="TCP port (0: any free port)")
@click.option("--open", "open_browser", is_flag=True, help="open the page in the default browser")
@click.option("--allow-host", "allow_host", multiple=True, metavar="NAME",
              help="also answer requests for this host name (repeatable); by default only the address "
                   "listened on, localhost and IP addresses, which protects against DNS rebinding")
@click.option("--request-timeout", type=click.FloatRange(0.1, 3600), default=REQUEST_TIMEOUT_S,
              show_default=True, help="seconds a client has to send a whole request, or to read more of "
                                      "an answer it stopped reading; idle and slow connections are closed "
                                      "after it")
@click.option("--workers", type=click.IntRange(1, MAX_WORKERS), default=1, show_default=True,
              help="processes answering requests, each computing one at a time with its own limits and "
                   "memory of answers; more answer more questions at once on a machine with more cores "
                   "(Linux, macOS)")
def serve(host: str, port: int, open_browser: bool, allow_host: tuple[str, ...],
          request_timeout: float, workers: int) -> None:
    """Start the web page and JSON API (OpenAPI schema at /openapi.json); offline, loopback only by
    default."""
    import threading
    import webbrowser

    from ..errors import need_extra

    need_extra("fastapi", "uvicorn", extra="web", what="cardfit serve")
    from ..web import create_app
    from ..web.server import allowed_hosts, run, run_workers, settle_heap

    if not is_loopback(host):
        click.echo(f"Warning: listening on {host}, not loopback: anyone who can reach this machine can use "
                   "the app (it has no authentication).", err=True)
    sock = listen(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}/"
    hosts = allowed_hosts(host, allow_host)
    app = create_app(allowed_hosts=hosts)
    from ..web.app import preload

    # once here, before any request (and before the workers fork, with no thread started): the catalogs and
    # the page's first question loaded, then what the process holds at start kept out of every later
    # garbage collection (settle_heap)
    preload()
    settle_heap()
    more = f", {workers} workers" if workers > 1 else ""
    click.echo(f"cardfit: serving on {url}{more} (Ctrl+C to stop)", err=True)

    def open_page() -> None:
        if open_browser:
            threading.Timer(1.0, webbrowser.open, args=(url,)).start()

    if workers == 1:
        open_page()
        run(app, sock, request_timeout_s=request_timeout)
        return
    # forked before any thread (the browser's timer) exists here
    status = run_workers(lambda: app, sock, workers, request_timeout, started=open_page)
    if status:
        raise click.exceptions.Exit(status)
