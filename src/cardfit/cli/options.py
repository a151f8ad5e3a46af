"""Click options built from the input descriptions (services/inputs.py), so each input is described once."""

from __future__ import annotations

from collections.abc import Callable

import click

from ..services.inputs import FieldInfo, describe


class Once(click.Option):
    """A single-valued option that refuses to be given twice (click keeps the last value silently, so
    `--gpu "RTX 4090" --gpu "RTX 3090"` would answer for the second card only)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def process_value(self, ctx: click.Context, value: object) -> object:
        given = super().process_value(ctx, value) or ()
        if len(given) > 1:
            shown = ", ".join(str(v) for v in given)
            raise click.BadParameter(f"given {len(given)} times ({shown}); give it once", ctx, self)
        return given[0] if given else None


def field_option(f: FieldInfo) -> click.Option:
    """One click option for one described input."""
    if f.kind == "bool":
        return click.Option([f"{f.flag}/--no-{f.flag[2:]}", f.name], default=f.default, help=f.help)
    if f.kind == "tuple":
        item = click.FLOAT if f.item == "float" and not f.limits.split else click.STRING
        return click.Option([f.flag, f.name], multiple=True, type=item, help=f.help)
    ctype = {"int": click.INT, "float": click.FLOAT}.get(f.kind, click.STRING)
    return Once([f.flag, f.name], type=ctype, default=None, help=f.help, show_default=False)


def input_options(model: type, skip: tuple[str, ...] = ()) -> list[click.Option]:
    """One option per field of `model` (except `skip`, and JSON objects, which come from the web API)."""
    return [field_option(f) for f in describe(model) if f.name not in skip and f.kind != "dict"]


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True,
                        help="print one JSON object on stdout, nothing else")(f)


def top_option(default: int) -> click.Option:
    """--top: how many cards the table shows."""
    return click.Option(["--top"], type=click.IntRange(1, 1000), default=default, show_default=True,
                        help="cards to show in the table")


def unit_option() -> click.Option:
    """--unit: the display unit of sizes (JSON is always bytes)."""
    return click.Option(["--unit"], type=click.Choice(["GB", "GiB"]), default="GB", show_default=True,
                        help="display unit: GB = 10^9 bytes, GiB = 2^30 bytes (JSON is always bytes)")


def add(option: click.Option) -> Callable[[Callable], Callable]:
    """Decorator: add a ready-made click.Option to a @click.command function."""

    def deco(f: Callable) -> Callable:
        f.__click_params__ = [*getattr(f, "__click_params__", []), option]  # type: ignore[attr-defined]
        return f

    return deco
