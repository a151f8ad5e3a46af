"""The click command line: every `cardfit` command line (the question commands are built from the command
table, services/table.py + services/inputs.py; the catalog commands, `serve` and `mcp` are click's own)."""

from __future__ import annotations

from typing import Any

import click

from .. import __version__
from .commands import Spec, modules, run, spec

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


class Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(modules())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands:
            found = spec(name)
            if found is not None:
                self.add_command(build_command(found))
        return self.commands.get(name)


@click.group(cls=Group, epilog=EPILOG_TOP, context_settings={"help_option_names": ["-h", "--help"],
                                                               "max_content_width": 110})
@click.version_option(__version__, message="%(prog)s, version %(version)s")
def cli() -> None:
    """Does this LLM fit on that GPU? Memory, fit, speed and cost, with arithmetic you can check.

    Sizes are shown in decimal GB (10^9 bytes) unless you pass --unit GiB; JSON is always in bytes.
    """


def build_command(spec: Spec) -> click.Command:
    """The click command of one table row (imports its service module: only for the command that runs)."""
    from ..services.table import BY_NAME
    from .options import input_options

    row = BY_NAME[spec.name]
    model = row.input_type()
    positional = row.argument if spec.argument else None
    display = list(spec.display)
    params: list[click.Parameter] = [click.Argument([positional], required=False)] if positional else []
    params += input_options(model, skip=(*spec.skip, *(() if positional is None else (positional,))))
    params += [*display, click.Option(["--json", "as_json"], is_flag=True,
                                      help="print one JSON object on stdout, nothing else")]
    shown = [p.name for p in display]

    def callback(**values: Any) -> None:
        run(spec.name, values, shown)  # type: ignore[arg-type]

    return click.Command(spec.name, params=params, callback=callback, help=spec.help,
                         epilog=spec.epilog)
