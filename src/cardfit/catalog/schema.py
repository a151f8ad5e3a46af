"""Which keys a catalog record may hold. The typed record (a frozen dataclass) is the schema: its fields
are the keys a data file may use, text fields included (sources, notes). A key that is not a field is an
error naming the file, the record and the key, so a typo in a TOML or JSON file never goes unnoticed.

Adding a key to a catalog is one line: a field on its record type."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from ..errors import CatalogError
from ..names import closest

# Keys the loader itself reads (never stored on the record): a user row replacing a built-in one says
# `override = true` (catalog/loader.py merge_records).
LOADER_KEYS = frozenset({"override"})
# Fields a loader or a file reader sets, never a data file.
_NOT_DATA = frozenset({"origin", "extra", "tensors", "file_quant", "provenance", "warnings"})


def keys_of(record_type: type, *, also: Iterable[str] = ()) -> frozenset[str]:
    """The keys a data row of `record_type` may hold: its fields (bar those set by the loader) and `also`."""
    return frozenset(f.name for f in fields(record_type) if f.name not in _NOT_DATA) | LOADER_KEYS | set(also)


def check_keys(row: Mapping[str, Any], allowed: frozenset[str], *, table: str, path: str = "",
               record: str = "") -> None:
    """CatalogError for the first key of `row` that `allowed` does not list (with the closest known key)."""
    if allowed.issuperset(row):  # every row of a good file: one set test, in C
        return
    unknown = sorted(k for k in row if k not in allowed)
    key = unknown[0]
    rid = record or str(row.get("id") or row.get("name") or row.get("tag") or "?")
    near = closest(key, {k: k for k in allowed}, n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    where = path or str(row.get("origin") or "")
    raise CatalogError(f"{table} '{rid}': unknown key '{key}'{hint}", path=where)


def row_error(table: str, row: Mapping[str, Any], e: TypeError) -> CatalogError:
    """A row the record type refused, in the file's words: "gpu 'x': missing key 'vendor'" (not the record
    constructor's "Gpu() missing required argument: 'vendor'"), naming the file."""
    msg = str(e)
    if "missing required argument: " in msg:
        msg = "missing key " + msg.split("missing required argument: ", 1)[1]
    return CatalogError(f"{table} '{row.get('id', '?')}': {msg}", path=str(row.get("origin") or ""))


def check_tables(data: Mapping[str, Any], allowed: Iterable[str], *, path: str) -> None:
    """The top-level tables of a file: a misspelt `[[gpus]]` would otherwise load nothing, silently."""
    known = frozenset(allowed)
    for key in data:
        if key not in known:
            near = closest(key, {k: k for k in known}, n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else f"; one of {', '.join(sorted(known))}"
            raise CatalogError(f"unknown table '{key}'{hint}", path=path)
