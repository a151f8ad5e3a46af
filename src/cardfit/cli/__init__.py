"""The `cardfit` command line: parse, call the library, render. Heavy imports stay inside commands.

click (cli/app.py) parses every command line that cli/argv.py does not read exactly as click would; a plain
question (`cardfit plan MODEL --gpu NAME …`) runs without importing click, ~25 ms of a cold start."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..errors import CardfitError
from .commands import command, echo, emit_json

__all__ = ["command", "echo", "emit_json", "main"]


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group (cli/app.py), imported when something asks for it
        from .app import cli

        return cli
    raise AttributeError(name)


# Containers allocated between two collections of the youngest generation while a plain command line runs
# (CPython's default is 700: `cardfit plan` builds tens of thousands, catalog JSON and records, and met ~37
# collections, ~4 % of its instructions, that found next to no garbage: reference counting frees it).
# Python docs, gc.set_threshold (https://docs.python.org/3/library/gc.html#gc.set_threshold); rule of thumb.
GC_THRESHOLD = 100_000
_GC_BEFORE: list[tuple[int, ...]] = []  # the thresholds main() replaced, for click's lines


def main(argv: list[str] | None = None) -> int:
    """`cardfit ARGS` (argv: the arguments, default the command line's); the exit status. Run as the
    command itself (no argv) on the plain path, it collects cyclic garbage less often (GC_THRESHOLD) and
    ends the process once the output is flushed."""
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None:
        import gc

        _GC_BEFORE.append(gc.get_threshold())
        gc.set_threshold(GC_THRESHOLD, *_GC_BEFORE[0][1:])
    code, plain = _run(args)
    if argv is None and plain:
        _exit(code)
    return code


def _exit(code: int) -> None:
    """End the process without tearing down every module and object (~9 ms of a ~90 ms answer): the output
    is flushed here, and nothing on the plain path registers an exit handler. A flush that fails (a closed
    pipe) returns instead, to Python's own exit."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _run(args: list[str]) -> tuple[int, bool]:
    """The exit status, and whether the plain path (cli/argv.py) ran the line (else click)."""
    plain = False
    try:
        from .argv import run_plain

        plain = run_plain(args)
        if not plain:
            if _GC_BEFORE:  # the web server and the rest of click's lines: Python's own thresholds
                import gc

                gc.set_threshold(*_GC_BEFORE[0])
            from .app import cli

            cli.main(args=args, prog_name="cardfit", standalone_mode=False)
    except CardfitError as e:
        echo(f"Error: {e}", err=True)
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        return getattr(e, "exit_status", 2), plain  # errors.NoAnswerError: 3
    except Exception as e:
        click = sys.modules.get("click")
        if click is not None and isinstance(e, click.exceptions.Abort):
            click.echo("Error: aborted", err=True)
            return 1, plain
        if click is not None and isinstance(e, click.ClickException):
            click.echo(f"Error: {e.format_message()}", err=True)
            return e.exit_code or 2, plain
        if click is not None and isinstance(e, click.exceptions.Exit):
            return e.exit_code, plain
        if isinstance(e, OSError):
            if e.errno == 32:  # broken pipe: the reader went away
                return 0, plain
            echo(f"Error: {e}", err=True)
            return 1, plain
        # a bug, not a user mistake: still one line, exit 1, traceback on request
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        echo(f"Error: internal error ({type(e).__name__}: {e}); please report it, and set "
             "CARDFIT_DEBUG=1 to see the traceback", err=True)
        return 1, plain
    return 0, plain


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
