"""Buying a card (data/purchase.toml): the purchase-price snapshot per card (price, the host's share of a
server and its power, each dated and sourced; the card's own rated power is the GPU catalog's `tdp_w`) and
the running-cost defaults (electricity, PUE, colocation, amortization), read by `cardfit breakeven --buy`."""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin, builtin_path
from .records import record
from .schema import check_keys, check_tables, keys_of, row_error


@record(slots=True)
class Purchase:
    """One card's purchase price and power, as of `date`."""

    gpu: str  # a GPU catalog name
    card_usd: float
    date: str
    source: str
    host_usd: float = 0.0  # the card's share of the server it needs (0: a machine already owned)
    host_w: float = 0.0  # the rest of the machine's power per card at full load
    host_source: str = ""


@record(slots=True)
class OwnDefaults:
    """What running an owned card costs beside its price, each figure with its source."""

    power_usd_kwh: float
    power_usd_kwh_source: str
    pue: float
    pue_source: str
    colo_usd_kw_month: float
    colo_source: str
    amortize_months: float
    amortize_source: str
    date: str


@record(slots=True)
class PurchaseCatalog:
    defaults: OwnDefaults
    rows: tuple[Purchase, ...]

    def find(self, gpu_id: str, resolve: Any) -> Purchase | None:
        """The row of the card whose GPU catalog id is `gpu_id` (`resolve`: GPU name → its record)."""
        return next((p for p in self.rows if resolve(p.gpu).id == gpu_id), None)


_NUMBERS = ("card_usd", "host_usd", "host_w")


def _purchase(row: dict[str, Any], path: str) -> Purchase:
    check_keys(row, keys_of(Purchase), table="purchase", path=path, record=str(row.get("gpu", "?")))
    try:
        p = Purchase(**row)
    except TypeError as e:
        raise row_error("purchase", {**row, "id": row.get("gpu", "?"), "origin": path}, e) from e
    for name in _NUMBERS:
        v = getattr(p, name)
        if not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
            raise CatalogError(f"purchase '{p.gpu}': {name} must be a number ≥ 0", path=path)
    return p


@cache
def default_purchases() -> PurchaseCatalog:
    data = builtin("purchase.toml")
    path = builtin_path("purchase.toml")
    check_tables(data, ("schema", "currency", "defaults", "purchase"), path=path)
    d = data["defaults"]
    check_keys(d, keys_of(OwnDefaults), table="defaults", path=path, record="defaults")
    return PurchaseCatalog(OwnDefaults(**d), tuple(_purchase(r, path) for r in data.get("purchase", ())))
