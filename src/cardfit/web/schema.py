"""The web API's request models: pydantic models built, on first use, from the same input descriptions as the
CLI options (services/inputs.py), so FastAPI validates request bodies and publishes them in its OpenAPI
schema. pydantic is imported only here, at the web edge."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from ..services.inputs import describe, split_values


def one_value(v: Any) -> Any:
    """A repeatable option given once, as a string ("gpu": "RTX 4090"): a tuple of it, as inputs.parse (the
    CLI and the Python API) takes it, rather than pydantic's "Input should be a valid tuple"."""
    return (v,) if isinstance(v, str) and v.strip() else v  # a blank one: inputs.parse's "is empty" line


@cache
def web_model(cls: type) -> Any:
    """The pydantic model for the input class `cls`: same names, types, defaults, limits and help."""
    from pydantic import BeforeValidator, ConfigDict, Field, create_model

    fields: dict[str, Any] = {}
    for f in describe(cls):
        lim = f.limits
        limits = {
            k: getattr(lim, k) for k in ("gt", "ge", "lt", "le", "max_length") if getattr(lim, k) is not None
        }
        annotation = Annotated[f.annotation, BeforeValidator(split_values)] if lim.split else \
            Annotated[f.annotation, BeforeValidator(one_value)] if f.kind == "tuple" else f.annotation
        # a default the command applies itself (None in the input only marks "not given") is the schema's
        extra = {"default": lim.applied} if lim.applied is not None else None
        fields[f.name] = (annotation, Field(f.default, description=f.help or None, json_schema_extra=extra,
                                            **limits))
    doc = cls.__doc__ if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}(") else None
    return create_model(cls.__name__, __config__=ConfigDict(extra="forbid", frozen=True), __doc__=doc,
                        **fields)
