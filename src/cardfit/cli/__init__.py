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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        from .argv import run_plain

        if not run_plain(args):
            from .app import cli

            cli.main(args=args, prog_name="cardfit", standalone_mode=False)
    except CardfitError as e:
        echo(f"Error: {e}", err=True)
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        return 2
    except Exception as e:
        click = sys.modules.get("click")
        if click is not None and isinstance(e, click.exceptions.Abort):
            click.echo("Error: aborted", err=True)
            return 1
        if click is not None and isinstance(e, click.ClickException):
            click.echo(f"Error: {e.format_message()}", err=True)
            return e.exit_code or 2
        if click is not None and isinstance(e, click.exceptions.Exit):
            return e.exit_code
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
