"""The API price catalog (data/apis.toml): the three tiers of the break-even guide and named APIs, each
price dated and
sourced. User files passed with --catalog add `[[tier]]` or `[[api]]` records through the same path."""

from __future__ import annotations

import os
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


def installed_dir() -> str | None:
    """Where `cardfit prices --update FILE` keeps the user's newer price snapshot: $XDG_DATA_HOME/cardfit
    when XDG_DATA_HOME is absolute, else ~/.local/share/cardfit (the XDG Base Directory spec's default data
    home, https://specifications.freedesktop.org/basedir-spec/latest/); None without a home."""
    from .loader import xdg_dir

    return xdg_dir("XDG_DATA_HOME", (".local", "share"))


# the installed snapshot keeps the format it came in (the loader reads a file by its suffix)
INSTALLED_NAMES = ("prices.toml", "prices.json")


def installed_files() -> tuple[str, ...]:
    """The installed price snapshot, when there is one: read before the files given with --catalog."""
    folder = installed_dir()
    if folder is None:
        return ()
    return tuple(p for n in INSTALLED_NAMES if os.path.isfile(p := os.path.join(folder, n)))


def load_apis(user_files: tuple[str, ...] = ()) -> Registry[ApiPrice]:
    user = [(str(p), read_user_file(p)) for p in (*installed_files(), *user_files)]
    return Registry("API", "cardfit apis", _records(user), lambda a: a.names)


def _records(user: list[tuple[str, dict[str, Any]]]) -> list[ApiPrice]:
    """The built-in tiers and APIs with the user's files (origin, parsed) merged over them, in order."""
    data = builtin("apis.toml")
    check_tables(data, FILE_TABLES, path="cardfit/data/apis.toml")
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
    return records


@cache
def default_apis() -> Registry[ApiPrice]:
    return load_apis()


def apis(user_files: tuple[str, ...] = ()) -> Registry[ApiPrice]:
    return load_apis(tuple(user_files)) if user_files else default_apis()


def check_snapshot(path: str) -> tuple[str, int]:
    """A price snapshot a user brings (`cardfit prices --update FILE`): a catalog file of `[[api]]` and
    `[[tier]]` rows, each dated and sourced, that loads over the built-in catalog (and the snapshot installed
    now, which it replaces). Returns its date (the newest row's) and its row count."""
    data = read_user_file(path)
    rows = [r for t in ("tier", "api") for r in data.get(t, [])]
    if not rows or set(data) - {"schema", "tier", "api"}:
        raise CatalogError("a price snapshot holds [[api]] and [[tier]] rows only (and at least one)",
                           path=path)
    for r in rows:
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) and r[k] for k in ("date", "source")):
            rid = r.get("id", "?") if isinstance(r, dict) else "?"
            raise CatalogError(f"api '{rid}': a snapshot row needs its `date` and `source`", path=path)
    _records([(path, data)])  # over the built-in rows alone: it replaces the snapshot installed now
    return max(str(r["date"]) for r in rows), len(rows)


def breakeven_guide_tiers(registry: Registry[ApiPrice]) -> list[ApiPrice]:
    return [registry.get(t) for t in BREAKEVEN_GUIDE_TIERS]
