"""Click options built from the pydantic input models (inputs.py), so each input is described once."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

import click
from pydantic import BaseModel


def _base(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and args:
        return _base(args[0])
    return annotation


def model_options(model: type[BaseModel], skip: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Decorate a click command with one option per field of `model` (except `skip`)."""

    def deco(f: Callable) -> Callable:
        for name, info in reversed(list(model.model_fields.items())):
            if name in skip:
                continue
            flag = "--" + name.replace("_", "-")
            typ = _base(info.annotation)
            if typ is dict or typing.get_origin(typ) is dict:  # JSON objects come from the web API, not flags
                continue
            help_text = info.description or ""
            if typ is bool:
                default = info.default if info.default is not None else None
                f = click.option(f"{flag}/--no-{flag[2:]}", name, default=default, help=help_text)(f)
            elif typing.get_origin(typ) is tuple:
                f = click.option(flag, name, multiple=True, type=click.Path(), help=help_text)(f)
            else:
                ctype = {int: click.INT, float: click.FLOAT}.get(typ, click.STRING)
                f = click.option(flag, name, type=ctype, default=None, help=help_text, show_default=False)(f)
        return f

    return deco


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout, nothing else")(f)


def unit_option(f: Callable) -> Callable:
    return click.option("--unit", type=click.Choice(["GB", "GiB"]), default="GB", show_default=True,
                        help="display unit: GB = 10^9 bytes, GiB = 2^30 bytes (JSON is always bytes)")(f)
