"""The command rows the CLI runs: `@command` registrations (Spec), the command → module map, and `run`, shared
by the click command line (cli/app.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing before the command line sets its GC
if TYPE_CHECKING:
    from typing import Any

# The commands that are not questions in the command table (services/table.py): catalogs, the web server and
# the MCP server.
OTHER = {"gpus": "catalog_cmds", "models": "catalog_cmds", "quants": "catalog_cmds", "apis": "cost_cmd",
         "prices": "cost_cmd",
         "serve": "serve_cmd", "mcp": "mcp_cmd"}


def modules() -> dict[str, str]:
    """Command name → the cli module that defines it ("" for a table row without a renderer); a module is
    imported only when its command runs, so `cardfit plan` never pays for the web app, the charts or the
    fine-tuning inputs."""
    from ..services.table import COMMANDS

    return {**{c.name: c.render for c in COMMANDS}, **OTHER}


def spec(name: str) -> Spec | None:
    """The `@command` row of NAME, importing its renderer module on first use; a table row without a renderer
    gets the plain one. None for a command click defines itself (catalogs, serve) or an unknown name."""
    lazy = modules()
    if name not in SPECS and name in lazy:
        if lazy[name]:
            __import__(f"{__package__}.{lazy[name]}")
        else:
            from ..services.table import BY_NAME

            row = BY_NAME[name]
            SPECS[name] = Spec(name, plain_render, None, (), (), row.argument is not None, help=row.summary)
    return SPECS.get(name)


def plain_render(result: Any, inp: Any) -> None:
    """The text of a command without its own renderer: the result's JSON keys as indented `key: value` lines
    (lists as `- item`), the same data as --json."""
    from ..services.table import to_json

    lines: list[str] = []

    def walk(value: Any, indent: str) -> None:
        for k, v in (value.items() if isinstance(value, dict) else enumerate(value)):
            head = f"{indent}{k}:" if isinstance(value, dict) else f"{indent}-"
            if isinstance(v, dict | list) and v:
                lines.append(head)
                walk(v, indent + "  ")
            else:
                lines.append(f"{head} {'none' if v is None else v}")

    data = to_json(result)
    walk(data if isinstance(data, dict | list) else {"result": data}, "")
    echo("\n".join(lines))


class Spec:
    """One `@command` row: its renderer, help epilog, the inputs it does not take as options (`skip`), its
    display options (click.Option) and whether it takes the positional argument."""

    def __init__(self, name: str, render: Callable[..., None], epilog: str | None, skip: tuple[str, ...],
                 display: tuple[Any, ...], argument: bool, help: str | None = None) -> None:
        self.name, self.render, self.epilog = name, render, epilog
        self.skip, self.display, self.argument = skip, display, argument
        self._help = help

    @property
    def help(self) -> str | None:
        """The command's help: the renderer's docstring, cleaned as click shows it (inspect.getdoc), read
        only when asked for (inspect costs ~5 ms of imports on a plain command line)."""
        if self._help is None:
            import inspect

            self._help = inspect.getdoc(self.render)
        return self._help


# Every `@command` row, by name; cli/app.py builds the click command of the one that runs (a renderer module
# defines several commands: plan_cmd has plan, max-context, max-sequences, largest-model).
SPECS: dict[str, Spec] = {}


def emit_json(data: Any) -> None:
    import json

    echo(json.dumps(data, indent=2, ensure_ascii=False))


def echo(message: str, err: bool = False) -> None:
    """click.echo(message, err=err): a line on stdout (stderr), flushed. click itself writes what it treats
    specially: ANSI escapes (stripped off a terminal) and a stream that would not take UTF-8 (it rewraps
    one whose encoding is ASCII)."""
    import codecs

    stream = sys.stderr if err else sys.stdout
    try:  # click._compat is_ascii_encoding, on the stream's encoding (ascii when it has none)
        ascii_stream = codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "ascii"
    except LookupError:
        ascii_stream = False
    if "\x1b" in message or ascii_stream or stream is None:
        import click

        click.echo(message, err=err)
        return
    stream.write(message + "\n")
    stream.flush()


def command(name: str, *, epilog: str | None = None, skip: tuple[str, ...] = (),
            display: tuple[Any, ...] = (),
            argument: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `cardfit NAME` from its row in the command table: the positional argument, one option per
    described input (except `skip`), the display options (click.Option: --unit,
    --top …) and --json. The decorated function prints the result as text: render(result, inp, **display
    values); its docstring is the command's help."""

    def deco(render: Callable[..., None]) -> Callable[..., None]:
        SPECS[name] = Spec(name, render, epilog, skip, display, argument)
        return render

    return deco


def run(name: str, values: dict[str, Any], display: list[str]) -> None:
    """Run command NAME on the values its options gave (click's): parse the input, run the
    service, print JSON or the renderer's text."""
    from ..services.inputs import parse
    from ..services.table import BY_NAME, to_json

    spec, row = SPECS[name], BY_NAME[name]
    as_json = values.pop("as_json")
    options = {k: values.pop(k) for k in display}
    inp = parse(row.input_type(), values)
    result = row.execute(inp)
    if as_json:
        emit_json(to_json(result))
    else:
        spec.render(result, inp, **options)
    why = getattr(result, "no_answer", None)  # a result that can be "no answer" says why (DeployReport)
    if why:
        from ..errors import NoAnswerError

        raise NoAnswerError(why)


