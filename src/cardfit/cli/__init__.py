"""The `cardfit` command line: parse (click, cli/app.py), call the library, render. Heavy imports stay inside
commands: `cardfit plan` imports its renderer module and the services it runs, never the web app."""

from __future__ import annotations

import os
import sys

from ..errors import CardfitError
from .commands import command, echo, emit_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing before the command line sets its GC
if TYPE_CHECKING:
    from typing import Any

__all__ = ["command", "echo", "emit_json", "main"]


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group (cli/app.py), imported when something asks for it
        from .app import cli

        return cli
    raise AttributeError(name)


# Containers allocated between two collections of the youngest generation while a one-shot command runs
# (CPython's default is 700: `cardfit plan` builds tens of thousands, catalog JSON and records, and met ~37
# collections, ~4 % of its instructions, that found next to no garbage: reference counting frees it).
# Python docs, gc.set_threshold (https://docs.python.org/3/library/gc.html#gc.set_threshold); rule of thumb.
GC_THRESHOLD = 100_000
# The commands that keep running (web and MCP servers): Python's own collection thresholds and exit.
SERVERS = ("serve", "mcp")


def main(argv: list[str] | None = None) -> int:
    """`cardfit ARGS` (argv: the arguments, default the command line's); the exit status. Run as the
    command itself (no argv) for a one-shot command (not a server), it collects cyclic garbage less often
    (GC_THRESHOLD) and ends the process once the output is flushed."""
    args = sys.argv[1:] if argv is None else list(argv)
    one_shot = argv is None and not (args and args[0] in SERVERS)
    if one_shot:
        import gc

        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    code = _run(args)
    if one_shot:
        _exit(code)
    return code


def _exit(code: int) -> None:
    """End the process without tearing down every module and object (~9 ms of a ~90 ms answer): the output
    is flushed here, and nothing a one-shot command runs registers an exit handler. A flush that fails (a
    closed pipe) returns instead, to Python's own exit."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _run(args: list[str]) -> int:
    """The exit status of the command line ARGS, errors written as one line on stderr."""
    import click

    try:
        from .app import cli

        cli.main(args=args, prog_name="cardfit", standalone_mode=False)
    except CardfitError as e:
        echo(f"Error: {e}", err=True)
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        return getattr(e, "exit_status", 2)  # errors.NoAnswerError: 3
    except click.exceptions.Abort:
        click.echo("Error: aborted", err=True)
        return 1
    except click.ClickException as e:
        click.echo(f"Error: {e.format_message()}", err=True)
        return e.exit_code or 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except Exception as e:
        if isinstance(e, OSError):
            if e.errno == 32:  # broken pipe: the reader went away
                return 0
            echo(f"Error: {e}", err=True)
            return 1
        # a bug, not a user mistake: still one line, exit 1, traceback on request
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        echo(f"Error: internal error ({type(e).__name__}: {e}); please report it, and set "
             "CARDFIT_DEBUG=1 to see the traceback", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
