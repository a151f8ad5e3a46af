"""Click options built from the input descriptions (services/inputs.py), so each input is described once."""

from __future__ import annotations

from collections.abc import Callable

import click

from ..services.inputs import FieldInfo, describe


def field_option(f: FieldInfo) -> click.Option:
    """One click option for one described input."""
    if f.kind == "bool":
        return click.Option([f"{f.flag}/--no-{f.flag[2:]}", f.name], default=f.default, help=f.help)
    if f.kind == "tuple":
        item = click.FLOAT if f.item == "float" and not f.limits.split else click.STRING
        return click.Option([f.flag, f.name], multiple=True, type=item, help=f.help)
    ctype = {"int": click.INT, "float": click.FLOAT}.get(f.kind, click.STRING)
    return click.Option([f.flag, f.name], type=ctype, default=None, help=f.help, show_default=False)


def input_options(model: type, skip: tuple[str, ...] = ()) -> list[click.Option]:
    """One option per field of `model` (except `skip`, and JSON objects, which come from the web API)."""
    return [field_option(f) for f in describe(model) if f.name not in skip and f.kind != "dict"]


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True,
                        help="print one JSON object on stdout, nothing else")(f)


def unit_option() -> click.Option:
    from .argv import unit_display

    return unit_display().to_click()  # type: ignore[no-any-return]


def add(option: click.Option) -> Callable[[Callable], Callable]:
    """Decorator: add a ready-made click.Option to a @click.command function."""

    def deco(f: Callable) -> Callable:
        f.__click_params__ = [*getattr(f, "__click_params__", []), option]  # type: ignore[attr-defined]
        return f

    return deco
