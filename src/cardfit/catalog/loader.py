"""Loads catalog data files: the built-ins shipped in `cardfit/data/` and the user's own TOML or JSON
files, through one path. A repeated id is an error unless the later record says `override = true`."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import CatalogError

MAX_USER_FILE_BYTES = 8 * 2**20


@cache
def builtin(name: str) -> dict[str, Any]:
    """Parse `cardfit/data/<name>` once per process."""
    with resources.files("cardfit.data").joinpath(name).open("rb") as f:
        try:
            return tomllib.load(f)
        except tomllib.TOMLDecodeError as e:  # a broken built-in is a packaging bug
            raise CatalogError(f"built-in catalog is malformed: {e}", path=name) from e


def read_user_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a user catalog file (TOML or JSON); every failure is a one-line CatalogError."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_USER_FILE_BYTES:
            raise CatalogError(f"file is {size:,} bytes; catalog files are capped at {MAX_USER_FILE_BYTES:,}", path=str(p))
        raw = p.read_bytes()
    except OSError as e:
        raise CatalogError(f"cannot read catalog file: {e.strerror or e}", path=str(p)) from e
    try:
        text = raw.decode("utf-8")
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise CatalogError(f"not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}", path=str(p)) from e
    if not isinstance(data, dict):
        raise CatalogError("top level must be a table/object", path=str(p))
    return data


def merge_records(
    builtin_rows: Iterable[dict[str, Any]], user_rows: Iterable[tuple[str, dict[str, Any]]], key: str = "id"
) -> list[dict[str, Any]]:
    """Built-in rows then user rows; a user row with an existing id must say `override = true`."""
    out: dict[str, dict[str, Any]] = {}
    for row in builtin_rows:
        if row[key] in out:
            raise CatalogError(f"duplicate id '{row[key]}' in built-in catalog")
        out[row[key]] = row
    for origin, row in user_rows:
        if not isinstance(row, dict) or key not in row:
            raise CatalogError(f"every record needs an '{key}'", path=origin)
        rid = row[key]
        if rid in out and not row.get("override"):
            raise CatalogError(f"id '{rid}' already exists; add `override = true` to replace it", path=origin)
        base = out.get(rid, {}) if row.get("override") else {}
        out[rid] = {**base, **{k: v for k, v in row.items() if k != "override"}, "origin": origin}
    return list(out.values())
