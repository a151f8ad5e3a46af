"""Command lines read without click: `cardfit NAME [ARG] --option value …` for a command of the command table,
where every token is one click reads one plain way (a known long option with its value, a flag, the one
positional argument). Anything else (help, --version, a short option, `--`, an unknown or repeated option, a
value that starts with '-' or that click would refuse) returns None and click reads the line, with its own
messages. Importing click costs ~25 ms of a ~100 ms answer; tests/test_argv.py holds that these values are
the ones click passes for the same command lines."""

from __future__ import annotations

from typing import Any

from .commands import SPECS, run, spec


class Display:
    """A display option of a command (--top, --unit): one description for click (`to_click`) and for
    `read`."""

    def __init__(self, flag: str, default: Any, help: str, *, choices: tuple[str, ...] = (),  # noqa: A002
                 low: int | None = None, high: int | None = None) -> None:
        self.flag, self.default, self.help = flag, default, help
        self.choices, self.low, self.high = choices, low, high
        self.name = flag[2:].replace("-", "_")

    def to_click(self) -> Any:
        import click

        kind = click.Choice(list(self.choices)) if self.choices else click.IntRange(self.low, self.high)
        return click.Option([self.flag], type=kind, default=self.default, show_default=True, help=self.help)

    def convert(self, text: str) -> Any:
        """The value click gives (click.Choice: exactly one of the choices; click.IntRange: int() inside the
        bounds); ValueError where click would refuse it."""
        if self.choices:
            if text not in self.choices:
                raise ValueError(text)
            return text
        value = int(text)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(text)
        return value


def top_display(default: int) -> Display:
    return Display("--top", default, "cards to show in the table", low=1, high=1000)


def unit_display() -> Display:
    return Display("--unit", "GB", "display unit: GB = 10^9 bytes, GiB = 2^30 bytes (JSON is always bytes)",
                   choices=("GB", "GiB"))


_FLAG = object()  # an option that takes no value


def _str(text: str) -> str:
    return text


def read(name: str, args: list[str]) -> dict[str, Any] | None:
    """The values click would pass to command NAME's callback for ARGS (the tokens after NAME), or None when
    the line is one for click to read."""
    from ..services.inputs import describe
    from ..services.table import BY_NAME

    spec = SPECS[name]
    if not all(isinstance(d, Display) for d in spec.display):
        return None
    row = BY_NAME[name]
    positional = row.argument if spec.argument else None
    values: dict[str, Any] = {} if positional is None else {positional: None}
    flags: dict[str, tuple[str, Any]] = {}  # option → (value name, converter, or (_FLAG, value))
    multiple: set[str] = set()
    for f in describe(row.input_type()):
        if f.name in spec.skip or f.name == positional or f.kind == "dict":
            continue
        if f.kind == "bool":
            values[f.name] = f.default
            flags[f.flag] = (f.name, (_FLAG, True))
            flags[f"--no-{f.flag[2:]}"] = (f.name, (_FLAG, False))
        elif f.kind == "tuple":
            values[f.name] = ()
            multiple.add(f.name)
            flags[f.flag] = (f.name, float if f.item == "float" and not f.limits.split else _str)
        else:
            values[f.name] = None
            flags[f.flag] = (f.name, {"int": int, "float": float}.get(f.kind, _str))
    for d in spec.display:
        values[d.name] = d.default
        flags[d.flag] = (d.name, d.convert)
    values["as_json"] = False
    flags["--json"] = ("as_json", (_FLAG, True))
    seen: set[str] = set()
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-"):
            if positional is None or positional in seen:
                return None
            values[positional] = token
            seen.add(positional)
            continue
        flag, eq, text = token.partition("=")
        if flag not in flags or flag == "--":
            return None
        key, convert = flags[flag]
        if key in seen and key not in multiple:
            return None
        seen.add(key)
        if isinstance(convert, tuple):
            if eq:
                return None
            values[key] = convert[1]
            continue
        if not eq:
            if i >= len(args) or args[i].startswith("-"):
                return None
            text = args[i]
            i += 1
        try:
            value = convert(text)
        except ValueError:
            return None
        values[key] = (*values[key], value) if key in multiple else value
    return values


# click's version_option message (cli/app.py passes it), also written here without click
VERSION_MESSAGE = "%(prog)s, version %(version)s"


def run_plain(args: list[str]) -> bool:
    """Run the command line without click when `read` takes it; False: click's to run."""
    if args == ["--version"]:
        from .. import __version__
        from .commands import echo

        echo(VERSION_MESSAGE % {"prog": "cardfit", "version": __version__})
        return True
    if not args or args[0].startswith("-"):
        return False
    name = args[0]
    found = spec(name)
    if found is None:  # unknown, or a command click defines itself (catalogs, serve)
        return False
    values = read(name, args[1:])
    if values is None:
        return False
    run(name, values, [d.name for d in found.display])
    return True
