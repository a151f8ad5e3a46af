"""Speculative decoding's sourced defaults (data/speculative.toml): the published acceptance of each method
per model family (what --acceptance defaults to) and the models that ship multi-token-prediction layers."""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import CatalogError
from .records import record
from .schema import check_keys, check_tables, keys_of

METHODS = ("draft", "eagle3", "mtp", "ngram")
FILE = "speculative.toml"


@record(slots=True)
class Acceptance:
    """One published acceptance figure: the rate alpha, or the mean tokens a step yields at `tokens`."""

    method: str
    family: str
    tokens: int
    source: str
    acceptance: float = 0.0
    acceptance_length: float = 0.0


@record(slots=True)
class Mtp:
    """A model with multi-token-prediction layers: how many (config.json num_nextn_predict_layers)."""

    model: str
    layers: int
    source: str


@cache
def _table() -> tuple[tuple[Acceptance, ...], tuple[Mtp, ...]]:
    from .loader import builtin, builtin_path

    data = builtin(FILE)
    path = builtin_path(FILE)
    check_tables(data, ("acceptance", "mtp"), path=path)
    rows = tuple(_row(Acceptance, r, "acceptance", path) for r in data.get("acceptance", ()))
    for a in rows:
        rate = 0 < a.acceptance < 1 or a.acceptance_length > 1
        if a.method not in METHODS or not a.tokens >= 1 or not rate:
            raise CatalogError(f"acceptance '{a.method}/{a.family}': a method of {', '.join(METHODS)}, "
                               "tokens >= 1 and an acceptance in (0, 1) or an acceptance_length above 1",
                               path=path)
    return rows, tuple(_row(Mtp, r, "mtp", path) for r in data.get("mtp", ()))


def _row(kind: type, row: dict[str, Any], table: str, path: str) -> Any:
    check_keys(row, keys_of(kind), table=table, path=path, record=str(row.get("method") or row.get("model")))
    return kind(**row)


def acceptance_for(method: str, model_id: str) -> Acceptance:
    """The published figure for `method` on a model: the row whose family is a word of the model's id, else
    the method's "*" row."""
    rows = [a for a in _table()[0] if a.method == method]
    words = set(model_id.lower().replace("_", "-").replace(".", "-").split("-"))
    own = [a for a in rows
           if a.family != "*" and (a.family in words or model_id.lower().startswith(a.family))]
    found = own or [a for a in rows if a.family == "*"]
    if not found:
        raise CatalogError(f"data/{FILE} has no acceptance for '{method}'", path=FILE)
    return found[0]


def mtp_layers(model_id: str, hf: str | None = None) -> Mtp | None:
    """The model's multi-token-prediction layers (None: the catalog knows of none)."""
    ids = {model_id.lower(), (hf or "").lower()}
    return next((m for m in _table()[1] if m.model.lower() in ids), None)
