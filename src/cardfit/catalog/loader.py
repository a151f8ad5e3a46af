"""Loads catalog data files: the built-ins shipped in `cardfit/data/` and the user's own TOML or JSON
files, through one path. A repeated id is an error unless the later record says `override = true`."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import CatalogError
from .schema import check_keys, check_tables

MAX_USER_FILE_BYTES = 8 * 2**20
# The tables a user's --catalog file may hold (GPUs, models, API tiers and APIs) and its format version.
USER_TABLES = ("schema", "gpu", "model", "tier", "api")


def builtin_path(name: str) -> str:
    """How errors name a built-in data file."""
    return f"cardfit/data/{name}"


def _cache_dir() -> Path | None:
    if os.environ.get("CARDFIT_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cardfit"


@cache
def builtin(name: str) -> dict[str, Any]:
    """Parse `cardfit/data/<name>` once per process. TOML parsing is pure Python and slow at start-up, so
    the parsed form is kept as JSON in the user's cache, keyed by a hash of the file's bytes (a changed
    file never reads a stale copy; an unwritable cache just means parsing every time)."""
    raw = resources.files("cardfit.data").joinpath(name).read_bytes()
    cache_dir = _cache_dir()
    cached = cache_dir / f"{name}.{hashlib.sha256(raw).hexdigest()[:20]}.json" if cache_dir else None
    if cached is not None:
        try:
            return json.loads(cached.read_bytes())
        except (OSError, ValueError):
            pass
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # a broken built-in is a packaging bug
        raise CatalogError(f"built-in catalog is malformed: {e}", path=name) from e
    if cached is not None:
        _write_cache(cached, data)
    return data


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        text = json.dumps(data)  # TOML dates are not JSON: such a file is simply not cached
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except (OSError, TypeError, ValueError):
        pass


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
    check_tables(data, USER_TABLES, path=str(p))
    return data


def merge_records(
    builtin_rows: Iterable[dict[str, Any]], user_rows: Iterable[tuple[str, dict[str, Any]]], key: str = "id", *,
    table: str, allowed: frozenset[str], builtin_file: str,
) -> list[dict[str, Any]]:
    """Built-in rows then user rows; a user row with an existing id must say `override = true`. Every row
    holds only the keys `allowed` lists (catalog/schema.py), else a CatalogError names file, record and key."""
    out: dict[str, dict[str, Any]] = {}
    for row in builtin_rows:
        check_keys(row, allowed, table=table, path=builtin_path(builtin_file))
        if row[key] in out:
            raise CatalogError(f"duplicate id '{row[key]}' in built-in catalog")
        out[row[key]] = row
    for origin, row in user_rows:
        if not isinstance(row, dict) or key not in row:
            raise CatalogError(f"every record needs an '{key}'", path=origin)
        check_keys(row, allowed, table=table, path=origin)
        rid = row[key]
        if rid in out and not row.get("override"):
            raise CatalogError(f"id '{rid}' already exists; add `override = true` to replace it", path=origin)
        base = out.get(rid, {}) if row.get("override") else {}
        out[rid] = {**base, **{k: v for k, v in row.items() if k != "override"}, "origin": origin}
    return list(out.values())
