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
  cardfit max-sequences llama-3.1-8b --gpu H100 --context 8192 --runtime vllm
  cardfit largest-model --gpu "RTX 4090" --quant Q4_K_M
  cardfit gpus
"""


# command name → module that defines it; a module is imported only when its command runs, so
# `cardfit plan` never pays for the web app, the charts or the fine-tuning inputs.
LAZY = {"plan": "plan_cmd", "max-context": "plan_cmd", "max-sequences": "plan_cmd", "largest-model": "plan_cmd", "speed": "speed_cmd", "finetune": "finetune_cmd",
        "breakeven": "cost_cmd", "validate": "validate_cmd", "gpus": "catalog_cmds", "models": "catalog_cmds",
        "quants": "catalog_cmds", "apis": "cost_cmd", "serve": "serve_cmd"}


class Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in LAZY if self.get_command(ctx, name) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in LAZY:
            try:
                __import__(f"{__name__}.{LAZY[name]}")
            except ModuleNotFoundError as e:
                if e.name != f"{__name__}.{LAZY[name]}":
                    raise
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
        click.echo(f"Error: internal error ({type(e).__name__}: {e}); please report it, and set CARDFIT_DEBUG=1 "
                   "to see the traceback", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
