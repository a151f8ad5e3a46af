"""The `cardfit` command line: parse, call the library, render. Heavy imports stay inside commands."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ..errors import CardfitError

EPILOG_TOP = """\b
Examples:
  cardfit plan llama3.1:8b
  cardfit plan meta-llama/Llama-3.3-70B-Instruct --quant fp8 --context 32768 --runtime vllm
  cardfit plan --params 7e9 --layers 32 --kv-heads 8 --head-dim 128 --quant bf16 --context 8192
  cardfit max-context qwen2.5:14b --gpu "RTX 4060 Ti"
  cardfit gpus
"""


class Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=Group, epilog=EPILOG_TOP, context_settings={"help_option_names": ["-h", "--help"],
                                                               "max_content_width": 110})
@click.version_option(package_name="cardfit")
def cli() -> None:
    """Does this LLM fit on that GPU? Memory, fit, speed and cost, with arithmetic you can check.

    Sizes are shown in decimal GB (10^9 bytes) unless you pass --unit GiB; JSON is always in bytes.
    """


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _register() -> None:
    from . import catalog_cmds, plan_cmd  # noqa: F401  (commands register themselves on `cli`)
    for mod in ("speed_cmd", "cost_cmd", "finetune_cmd", "validate_cmd", "serve_cmd"):
        try:
            __import__(f"{__name__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":
                raise


def main(argv: list[str] | None = None) -> int:
    _register()
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
        click.echo(f"Error: internal error ({type(e).__name__}: {e}); please report it, and set CARDFIT_DEBUG=1 "
                   "to see the traceback", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
