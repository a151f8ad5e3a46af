"""`cardfit serve`: the local web page and JSON API (cardfit.web)."""

from __future__ import annotations

import ipaddress

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


@cli.command(epilog=SERVE_EPILOG)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but loopback exposes the app to your network")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="TCP port")
@click.option("--open", "open_browser", is_flag=True, help="open the page in the default browser")
def serve(host: str, port: int, open_browser: bool) -> None:
    """Start the web page and JSON API (OpenAPI at /openapi.json, docs at /docs)."""
    import threading
    import webbrowser

    import uvicorn

    from ..web import create_app

    if not is_loopback(host):
        click.echo(f"Warning: listening on {host}, not loopback: anyone who can reach this machine can use the app "
                   "(it has no authentication).", err=True)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}/"
    click.echo(f"cardfit: serving on {url} (Ctrl+C to stop)", err=True)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(create_app(), host=host, port=port, log_level="warning", access_log=False,
                            timeout_keep_alive=5, limit_concurrency=256, server_header=False)
    uvicorn.Server(config).run()
