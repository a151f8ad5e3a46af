"""The `cardfit` command line: parse, call the library, render. Heavy imports stay inside commands."""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import CardfitError

EPILOG_TOP = """\b
Examples:
  cardfit plan llama3.1:8b
  cardfit plan meta-llama/Llama-3.3-70B-Instruct --quant fp8 --context 32768 --runtime vllm
  cardfit plan --params 7e9 --layers 32 --kv-heads 8 --head-dim 128 --quant bf16 --context 8192
  cardfit max-context qwen2.5:14b --gpu "RTX 4060 Ti"
  cardfit max-sequences llama-3.1-8b --gpu H100 --context 8192 --runtime vllm
  cardfit largest-model --gpu "RTX 4090" --quant Q4_K_M
  cardfit gpus
"""


# The commands that are not questions in the command table (services/table.py): catalogs and the web server.
OTHER = {"gpus": "catalog_cmds", "models": "catalog_cmds", "quants": "catalog_cmds", "apis": "cost_cmd",
         "serve": "serve_cmd"}


def _lazy() -> dict[str, str]:
    """Command name → the cli module that defines it; a module is imported only when its command runs, so
    `cardfit plan` never pays for the web app, the charts or the fine-tuning inputs."""
    from ..services.table import COMMANDS

    return {**{c.name: c.render for c in COMMANDS}, **OTHER}


# `@command` rows whose click.Command is not built yet: a renderer module defines several commands (plan_cmd:
# plan, max-context, max-sequences, largest-model) and `cardfit plan` builds only its own options.
_PENDING: dict[str, Callable[[], click.Command]] = {}


class Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_lazy())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands:
            lazy = _lazy()
            if name in lazy and name not in _PENDING:
                __import__(f"{__name__}.{lazy[name]}")
            if name in _PENDING:
                self.add_command(_PENDING.pop(name)())
        return self.commands.get(name)


@click.group(cls=Group, epilog=EPILOG_TOP, context_settings={"help_option_names": ["-h", "--help"],
                                                               "max_content_width": 110})
@click.version_option(package_name="cardfit")
def cli() -> None:
    """Does this LLM fit on that GPU? Memory, fit, speed and cost, with arithmetic you can check.

    Sizes are shown in decimal GB (10^9 bytes) unless you pass --unit GiB; JSON is always in bytes.
    """


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def command(name: str, *, epilog: str | None = None, skip: tuple[str, ...] = (),
            display: tuple[Any, ...] = (),
            argument: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `cardfit NAME` from its row in the command table: the positional argument, one option per
    described input (except `skip`), the display options (click.Option: --unit, --top …) and --json. The
    decorated function prints the result as text: render(result, inp, **display values); its docstring is the
    command's help."""

    def deco(render: Callable[..., None]) -> Callable[..., None]:
        _PENDING[name] = lambda: _build_command(name, render, epilog, skip, display, argument)
        return render

    return deco


def _build_command(name: str, render: Callable[..., None], epilog: str | None, skip: tuple[str, ...],
                   display: tuple[Any, ...], argument: bool) -> click.Command:
    """The click command of one table row (imports its service module: only for the command that runs)."""
    from ..services.inputs import parse
    from ..services.table import BY_NAME, to_json
    from .options import input_options

    row = BY_NAME[name]
    model = row.input_type()
    positional = row.argument if argument else None
    params: list[click.Parameter] = [click.Argument([positional], required=False)] if positional else []
    params += input_options(model, skip=(*skip, *(() if positional is None else (positional,))))
    params += [*display, click.Option(["--json", "as_json"], is_flag=True,
                                      help="print one JSON object on stdout, nothing else")]
    shown = [p.name for p in display]

    def callback(as_json: bool, **values: Any) -> None:
        options = {k: values.pop(k) for k in shown}
        inp = parse(model, values)
        result = row.execute(inp)
        if as_json:
            emit_json(to_json(result))
            return
        render(result, inp, **options)

    return click.Command(name, params=params, callback=callback, help=inspect.getdoc(render), epilog=epilog)


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="cardfit", standalone_mode=False)
    except CardfitError as e:
        click.echo(f"Error: {e}", err=True)
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        return 2
    except click.exceptions.Abort:
        click.echo("Error: aborted", err=True)
        return 1
    except click.ClickException as e:
        click.echo(f"Error: {e.format_message()}", err=True)
        return e.exit_code or 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except OSError as e:
        if e.errno == 32:  # broken pipe: the reader went away
            return 0
        click.echo(f"Error: {e}", err=True)
        return 1
    except Exception as e:  # a bug, not a user mistake: still one line, exit 1, traceback on request
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        click.echo(f"Error: internal error ({type(e).__name__}: {e}); please report it, and set "
                   "CARDFIT_DEBUG=1 to see the traceback", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
