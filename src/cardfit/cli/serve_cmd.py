"""`cardfit serve`: the local web page and JSON API (cardfit.web)."""

from __future__ import annotations

import ipaddress
import os
import socket

import click

from . import cli

SERVE_EPILOG = """\b
Examples:
  cardfit serve                      # http://127.0.0.1:8000/
  cardfit serve --port 8765 --open   # and open the page in a browser
  curl -s localhost:8000/api/plan -H 'content-type: application/json' -d '{"model": "llama3.1:8b", "gpu": "RTX 4090"}'
"""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """Bind here, so a busy port is one `Error:` line, and --port 0 picks a free one."""
    from ..errors import InputError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        raise InputError(f"cannot listen on {host}:{port} ({why})", field="port",
                         hint="pass --port with a free port, or --port 0 for any") from None


@cli.command(epilog=SERVE_EPILOG)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but loopback exposes the app to your network")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="TCP port (0: any free port)")
@click.option("--open", "open_browser", is_flag=True, help="open the page in the default browser")
def serve(host: str, port: int, open_browser: bool) -> None:
    """Start the web page and JSON API (OpenAPI schema at /openapi.json); offline, loopback only by default."""
    import threading
    import webbrowser

    import uvicorn

    from ..web import create_app

    if not is_loopback(host):
        click.echo(f"Warning: listening on {host}, not loopback: anyone who can reach this machine can use the app "
                   "(it has no authentication).", err=True)
    sock = listen(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}/"
    click.echo(f"cardfit: serving on {url} (Ctrl+C to stop)", err=True)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False, timeout_keep_alive=5,
                            limit_concurrency=256, server_header=False)
    uvicorn.Server(config).run(sockets=[sock])
