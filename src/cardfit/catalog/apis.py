"""The API price catalog (data/apis.toml): the three tiers of the break-even guide and named APIs, each
price dated and
sourced. User files passed with --catalog add `[[tier]]` or `[[api]]` records through the same path."""

from __future__ import annotations

from dataclasses import field
from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin, merge_records, read_user_file
from .records import record
from .registry import Registry
from .schema import check_tables, keys_of, row_error

# the comparison of the break-even guide, cheapest first
BREAKEVEN_GUIDE_TIERS = ("open-8b", "small-commercial", "frontier")


@record(slots=True)
class ApiPrice:
    id: str
    name: str
    output_usd_per_m: float
    input_usd_per_m: float = 0.0
    input_source: str = ""  # where the input price comes from, when not from `source` (the guide's tiers)
    cached_input_usd_per_m: float | None = None
    kind: str = "api"  # "tier" (the illustrative tiers of the break-even guide) or "api" (a named product)
    provider: str = ""
    aliases: tuple[str, ...] = ()
    note: str = ""
    source: str = ""
    date: str = ""
    evidence: str = ""
    long_context_note: str = ""  # a different price for long prompts (not modelled: the record says it)
    # a dated price change or promotion on the provider's page, kept for the reader (not modelled)
    price_from_2027: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    promo_price: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    origin: str = "built-in"

    @property
    def names(self) -> list[str]:
        return [self.id, self.name, *self.aliases]


KEYS = keys_of(ApiPrice) - {"kind"}  # the table ([[tier]] or [[api]]) gives the kind
# apis.toml's own tables besides the records: the file's format and the figures of the rental guide's
# worked example (read by tests only)
FILE_TABLES = ("schema", "currency", "unit", "tier", "api", "breakeven_example")


def api_from_row(row: dict[str, Any], kind: str) -> ApiPrice:
    known = {k: v for k, v in row.items() if k != "override"}
    known["aliases"] = tuple(row.get("aliases", ()))
    try:
        api = ApiPrice(**known, kind=kind)
    except TypeError as e:
        raise row_error("api", row, e) from e
    for name in ("output_usd_per_m", "input_usd_per_m"):
        value = getattr(api, name)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise CatalogError(f"api '{api.id}': {name} must be a number ≥ 0", path=api.origin)
    cached = api.cached_input_usd_per_m
    if cached is not None and (not isinstance(cached, int | float) or isinstance(cached, bool) or cached < 0):
        raise CatalogError(f"api '{api.id}': cached_input_usd_per_m must be a number ≥ 0", path=api.origin)
    if api.output_usd_per_m <= 0:
        raise CatalogError(f"api '{api.id}': output_usd_per_m must be above 0", path=api.origin)
    return api


def load_apis(user_files: tuple[str, ...] = ()) -> Registry[ApiPrice]:
    data = builtin("apis.toml")
    check_tables(data, FILE_TABLES, path="cardfit/data/apis.toml")
    user = [(str(p), read_user_file(p)) for p in user_files]
    records: list[ApiPrice] = []
    seen: set[str] = set()
    for table, kind in (("tier", "tier"), ("api", "api")):
        rows = merge_records(data.get(table, []), [(o, r) for o, d in user for r in d.get(table, [])],
                             table=table, allowed=KEYS, builtin_file="apis.toml")
        for row in rows:
            if row["id"] in seen:
                raise CatalogError(f"api id '{row['id']}' is both a tier and an api",
                                   path=row.get("origin", ""))
            seen.add(row["id"])
            records.append(api_from_row(row, kind))
    return Registry("API", "cardfit apis", records, lambda a: a.names)


@cache
def default_apis() -> Registry[ApiPrice]:
    return load_apis()


def apis(user_files: tuple[str, ...] = ()) -> Registry[ApiPrice]:
    return load_apis(tuple(user_files)) if user_files else default_apis()


def breakeven_guide_tiers(registry: Registry[ApiPrice]) -> list[ApiPrice]:
    return [registry.get(t) for t in BREAKEVEN_GUIDE_TIERS]
